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
    let cmdline = read_cmdline(&dir);
    let (ppid, pgid) = parents(&dir).unzip();
    // A multiprocessing child runs its launcher's program: the nearest ancestor whose
    // command line is not a bootstrap (a forkserver child's parent is the forkserver).
    let program = cmdline
        .as_deref()
        .filter(|c| crate::model::label::is_mp_bootstrap(c))
        .and_then(|_| {
            let mut at = ppid?;
            for _ in 0..8 {
                let up = format!("{root}/{at}");
                let cmd = read_cmdline(&up)?;
                if !crate::model::label::is_mp_bootstrap(&cmd) {
                    return Some(cmd);
                }
                at = parents(&up)?.0;
            }
            None
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
        ppid,
        pgid,
        program,
        started: started_at(root, &dir),
        ..ProcInfo::default()
    };
    let (mut addr, mut port) = (None, None);
    if let Ok(env) = fs::read(format!("{dir}/environ")) {
        info.env_readable = true;
        let mut kube = crate::model::placement::KubeEnv::default();
        let mut slurm = crate::model::placement::Slurm::default();
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
            } else if let Some(v) = var.strip_prefix("MASTER_ADDR=") {
                addr = Some(v.trim().to_string());
            } else if let Some(v) = var.strip_prefix("MASTER_PORT=") {
                port = Some(v.trim().to_string());
            } else if let Some(v) = var.strip_prefix("TORCHELASTIC_RUN_ID=") {
                info.run_id = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            } else if !slurm.var(&var) {
                kube.var(&var);
            }
        }
        info.slurm = slurm.finish();
        info.master = match (addr, port) {
            (Some(a), Some(p)) if !a.is_empty() && !p.is_empty() => Some(format!("{a}:{p}")),
            _ => None,
        };
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

/// The command line, arguments joined by spaces; `None` for a kernel thread or a process
/// that is gone.
fn read_cmdline(dir: &str) -> Option<String> {
    let raw = fs::read(format!("{dir}/cmdline")).ok()?;
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
}

/// Parent pid and process group (fields 4 and 5 of `stat`).
fn parents(dir: &str) -> Option<(u32, u32)> {
    let stat = fs::read_to_string(format!("{dir}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields start after the last ')'.
    let mut f = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// When the process started, Unix ms: its start time after boot (field 22 of stat, in clock
/// ticks) from the boot time (`btime` of /proc/stat).
fn started_at(root: &str, dir: &str) -> Option<crate::model::time::Ts> {
    let stat = fs::read_to_string(format!("{dir}/stat")).ok()?;
    let ticks: i64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let btime: i64 = fs::read_to_string(format!("{root}/stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| btime * 1000 + ticks * 1000 / hz)
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
        // This test process started within the last hour (the clock can be off by a tick).
        let age = crate::model::time::now_ms() - me.started.expect("a start time");
        assert!((-1_000..3_600_000).contains(&age), "started {age} ms ago");
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

    fn fake(root: &std::path::Path, pid: u32, ppid: u32, cmd: &[u8], env: &[u8]) {
        let p = root.join(pid.to_string());
        fs::create_dir(&p).expect("mkdir");
        fs::write(p.join("comm"), "python3\n").expect("write");
        fs::write(p.join("cmdline"), cmd).expect("write");
        let stat = format!("{pid} (pt_main thread) S {ppid} 77 77 0 -1 4194560 1 0 0 0");
        fs::write(p.join("stat"), stat).expect("write");
        fs::write(p.join("environ"), env).expect("write");
    }

    #[test]
    fn a_spawn_child_runs_its_launchers_program_and_job() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fake(root, 1, 0, b"/sbin/init\0", b"");
        fake(root, 959, 1, b"python3\0ddp_spawn.py\0--epochs\x003\0", b"");
        let spawn = b"/usr/bin/python3\0-c\0from multiprocessing.spawn import spawn_main; \
spawn_main(tracker_fd=5, pipe_handle=7)\0--multiprocessing-fork\0";
        let env = b"MASTER_ADDR=127.0.0.1\0MASTER_PORT=29511\0RANK=1\0WORLD_SIZE=2\0";
        fake(root, 961, 959, spawn, env);
        // A forkserver child: its parent is the forkserver, whose parent runs the program.
        let fsrv = b"/usr/bin/python3\0-c\0from multiprocessing.forkserver import main; \
main(8, 9, ['__main__'], **{'sys_path': ['/w'], 'main_path': '/w/fs.py'})\0";
        fake(root, 970, 959, fsrv, b"");
        fake(root, 971, 970, fsrv, b"TORCHELASTIC_RUN_ID=abc\0");
        let r = root.to_str().expect("utf8 path");
        let child = read_at(r, 961);
        assert_eq!(child.ppid, Some(959));
        assert_eq!(child.pgid, Some(77));
        assert_eq!(
            child.program.as_deref(),
            Some("python3 ddp_spawn.py --epochs 3")
        );
        assert_eq!(child.master.as_deref(), Some("127.0.0.1:29511"));
        assert_eq!((child.rank, child.world_size), (Some(1), Some(2)));
        let forked = read_at(r, 971);
        assert_eq!(
            forked.program.as_deref(),
            Some("python3 ddp_spawn.py --epochs 3")
        );
        assert_eq!(forked.run_id.as_deref(), Some("abc"));
        // The program itself has no other program.
        assert_eq!(read_at(r, 959).program, None);
    }

    #[test]
    fn start_ticks_of_self() {
        assert!(start_ticks(std::process::id()).is_some());
    }
}
