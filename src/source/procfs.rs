//! What /proc says about a GPU process. Every read may fail (another user's
//! process, a process that just exited): the result then carries what is known.

use std::ffi::CStr;
use std::fs;

use crate::model::sample::ProcInfo;

/// Read name, user, command line and the CUDA device variables of `pid`.
pub fn read(pid: u32) -> ProcInfo {
    read_at("/proc", pid)
}

pub fn read_at(root: &str, pid: u32) -> ProcInfo {
    let dir = format!("{root}/{pid}");
    let name = fs::read_to_string(format!("{dir}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string());
    let cmdline = fs::read(format!("{dir}/cmdline")).ok().and_then(|raw| {
        let parts: Vec<String> = raw
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| {
                // `python -c '...'` puts newlines and tabs in arguments; one row stays one row.
                String::from_utf8_lossy(p)
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect::<String>()
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    });
    let user = fs::read_to_string(format!("{dir}/status"))
        .ok()
        .and_then(|s| status_uid(&s))
        .map(|uid| user_name(uid).unwrap_or_else(|| uid.to_string()));
    let mut info = ProcInfo {
        pid,
        user,
        name,
        cmdline,
        ..ProcInfo::default()
    };
    if let Ok(env) = fs::read(format!("{dir}/environ")) {
        info.env_readable = true;
        let mut kube = crate::model::placement::KubeEnv::default();
        for var in env.split(|&b| b == 0) {
            let var = String::from_utf8_lossy(var);
            if let Some(v) = var.strip_prefix("CUDA_VISIBLE_DEVICES=") {
                info.cuda_visible_devices = Some(v.to_string());
            } else if let Some(v) = var.strip_prefix("CUDA_DEVICE_ORDER=") {
                info.cuda_device_order = Some(v.to_string());
            } else if let Some(v) = var.strip_prefix("RANK=") {
                info.rank = v.trim().parse().ok();
            } else if let Some(v) = var.strip_prefix("LOCAL_RANK=") {
                info.local_rank = v.trim().parse().ok();
            } else if let Some(v) = var.strip_prefix("WORLD_SIZE=") {
                info.world_size = v.trim().parse().ok();
            } else {
                kube.var(&var);
            }
        }
        info.kube = kube.finish(
            || {
                fs::read_to_string(format!(
                    "{dir}/root/var/run/secrets/kubernetes.io/serviceaccount/namespace"
                ))
                .ok()
            },
            || fs::read_to_string(format!("{dir}/cgroup")).ok(),
        );
    }
    info
}

/// Start time in clock ticks (field 22 of /proc/PID/stat): tells a reused pid from the old one.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn status_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|uid| uid.parse().ok())
}

/// Resolve a uid through NSS (so LDAP users work too), without caching: called once per new pid.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives the returned name pointer,
    // which is copied before buf is dropped.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_name points to a NUL-terminated string inside buf.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The uid of a user name (`getpwnam_r`), or None when this machine has no such user.
pub fn user_id(name: &str) -> Option<u32> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call and buf outlives it; only pw_uid is read.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some(pwd.pw_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_by_name() {
        assert_eq!(user_id("root"), Some(0));
        assert_eq!(user_id("no-such-user-gpumon"), None);
        assert_eq!(user_id("a\0b"), None);
    }

    #[test]
    fn reads_own_process_and_survives_missing_one() {
        let me = read(std::process::id());
        assert!(me.name.is_some());
        assert!(me.cmdline.is_some());
        assert!(me.env_readable);
        assert!(me.user.is_some());
        let gone = read(u32::MAX - 1);
        assert_eq!(gone.name, None);
        assert!(!gone.env_readable);
    }

    #[test]
    fn reads_cuda_variables_from_a_fake_proc() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("42");
        fs::create_dir(&p).expect("mkdir");
        fs::write(p.join("comm"), "python\n").expect("write");
        fs::write(p.join("cmdline"), b"python\x00train.py\x00--lr\x00003\x00").expect("write");
        fs::write(p.join("status"), "Name:\tpython\nUid:\t0\t0\t0\t0\n").expect("write");
        fs::write(
            p.join("environ"),
            b"A=1\0CUDA_VISIBLE_DEVICES=2,3\0CUDA_DEVICE_ORDER=PCI_BUS_ID\0",
        )
        .expect("write");
        let root = dir.path().to_str().expect("utf8 path");
        let info = read_at(root, 42);
        assert_eq!(info.name.as_deref(), Some("python"));
        assert_eq!(info.cmdline.as_deref(), Some("python train.py --lr 003"));
        assert_eq!(info.user.as_deref(), Some("root"));
        assert_eq!(info.cuda_visible_devices.as_deref(), Some("2,3"));
        assert_eq!(info.cuda_device_order.as_deref(), Some("PCI_BUS_ID"));
    }

    #[test]
    fn start_ticks_of_self() {
        assert!(start_ticks(std::process::id()).is_some());
    }
}
