//! Where the interposer listens, and who may talk to it (docs/protocol.md,
//! "Transport").

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The socket directory: `$GPUMON_DIR`, else `$XDG_RUNTIME_DIR/gpumon` when that
/// runtime dir is the user's, else `/tmp/gpumon-<uid>`.
pub fn socket_dir(gpumon_dir: Option<OsString>, xdg: Option<OsString>, uid: u32) -> PathBuf {
    if let Some(d) = gpumon_dir.filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(x) = xdg.filter(|x| !x.is_empty()) {
        let x = PathBuf::from(x);
        if std::fs::metadata(&x).is_ok_and(|m| m.uid() == uid) {
            return x.join("gpumon");
        }
    }
    PathBuf::from(format!("/tmp/gpumon-{uid}"))
}

/// Creates the directory with mode 0700, or checks an existing one is the
/// user's and closed to group and others.
pub fn prepare_dir(dir: &Path, uid: u32) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != uid {
        return Err(format!("{} belongs to uid {}", dir.display(), meta.uid()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("{} is open to group or others", dir.display()));
    }
    Ok(())
}

/// The pid in the outermost PID namespace this process can see (`NSpid`'s
/// first field), and its own pid when that differs.
pub fn host_pid(status: &str, own: u32) -> (u32, Option<u32>) {
    let outer = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse::<u32>().ok())
        .unwrap_or(own);
    (outer, (outer != own).then_some(own))
}

/// Whether the executable is a Python interpreter, which may host the Python
/// companion on `<pid>.sock` (now or later).
pub fn looks_like_python(exe: &Path) -> bool {
    exe.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"))
}

/// Binds `<pid>.sock`, or `<pid>.driver.sock` when the process is Python or
/// `<pid>.sock` is already served (the Python companion got there first).
/// A socket file nobody answers on is stale and replaced.
pub fn bind(dir: &Path, pid: u32, python: bool) -> io::Result<(UnixListener, PathBuf)> {
    let plain = dir.join(format!("{pid}.sock"));
    let driver = dir.join(format!("{pid}.driver.sock"));
    let path = if python || UnixStream::connect(&plain).is_ok() {
        driver
    } else {
        plain
    };
    match UnixListener::bind(&path) {
        Ok(l) => Ok((l, path)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            if UnixStream::connect(&path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(&path)?;
            UnixListener::bind(&path).map(|l| (l, path))
        }
        Err(e) => Err(e),
    }
}

/// The peer's uid from `SO_PEERCRED`.
pub fn peer_uid(fd: i32) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred`/`len` are valid out-pointers of the right size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

/// The protocol's rule: same user, or root.
pub fn peer_allowed(peer: u32, own: u32) -> bool {
    peer == own || peer == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::io::AsRawFd;

    #[test]
    fn dir_choice_follows_the_protocol() {
        let t = tempfile::tempdir().expect("tempdir");
        // SAFETY: `getuid` has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let g = socket_dir(Some("/x/y".into()), None, uid);
        assert_eq!(g, PathBuf::from("/x/y"));
        let x = socket_dir(None, Some(t.path().into()), uid);
        assert_eq!(x, t.path().join("gpumon"));
        assert_eq!(
            socket_dir(None, Some(t.path().into()), uid + 1),
            PathBuf::from(format!("/tmp/gpumon-{}", uid + 1))
        );
        assert_eq!(
            socket_dir(Some("".into()), None, 7),
            PathBuf::from("/tmp/gpumon-7")
        );
    }

    #[test]
    fn prepare_dir_refuses_open_directories() {
        let t = tempfile::tempdir().expect("tempdir");
        // SAFETY: `getuid` has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let d = t.path().join("g");
        assert!(prepare_dir(&d, uid).is_ok());
        let mode = std::fs::metadata(&d)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o700));
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(prepare_dir(&d, uid).is_err());
        assert!(prepare_dir(&d, uid + 1).is_err());
    }

    #[test]
    fn nspid_picks_the_outer_pid() {
        let s = "Name:\tx\nNSpid:\t4242\t17\nVmRSS: 1 kB\n";
        assert_eq!(host_pid(s, 17), (4242, Some(17)));
        assert_eq!(host_pid("NSpid:\t17\n", 17), (17, None));
        assert_eq!(host_pid("", 9), (9, None));
    }

    #[test]
    fn bind_prefers_plain_then_driver_and_replaces_stale() {
        let t = tempfile::tempdir().expect("tempdir");
        let (first, p1) = bind(t.path(), 5, false).expect("bind");
        assert!(p1.ends_with("5.sock"));
        // The plain name is served now, so a second listener takes the driver name.
        let (_second, p2) = bind(t.path(), 5, false).expect("bind");
        assert!(p2.ends_with("5.driver.sock"));
        drop(first);
        // The listener is gone but its file remains: stale, so it is replaced.
        let (_third, p3) = bind(t.path(), 5, false).expect("bind");
        assert!(p3.ends_with("5.sock"));
        let (_py, p4) = bind(t.path(), 6, true).expect("bind");
        assert!(p4.ends_with("6.driver.sock"));
        assert!(looks_like_python(Path::new("/usr/bin/python3.12")));
        assert!(!looks_like_python(Path::new("/usr/bin/java")));
    }

    #[test]
    fn peer_credentials_are_read_and_checked() {
        let (a, _b) = UnixStream::pair().expect("pair");
        // SAFETY: `getuid` has no preconditions and cannot fail.
        let own = unsafe { libc::getuid() };
        assert_eq!(peer_uid(a.as_raw_fd()), Some(own));
        assert!(peer_allowed(own, own));
        assert!(peer_allowed(0, own));
        assert!(!peer_allowed(own + 1, own) || own + 1 == 0);
    }
}
