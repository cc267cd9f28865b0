//! Where companions put their sockets, and who may talk to whom.
//! The rules mirror `python/gpumon/_paths.py`; docs/protocol.md is the contract.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Effective uid of this process.
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Peer-credential rule of the protocol: same user, or root on either side.
/// A root monitor may watch any user's companion, but only one whose socket
/// sits in that same user's directory, so a socket planted elsewhere is refused.
pub fn peer_allowed(own: u32, peer: u32, dir_owner: u32) -> bool {
    peer == own || peer == 0 || (own == 0 && peer == dir_owner)
}

/// Directories to scan for one user, most specific first, without duplicates.
/// Companions of the same user may run with a different environment than the
/// monitor (no `XDG_RUNTIME_DIR` under cron or in a container), so every place
/// a companion could have picked is scanned.
pub fn candidate_dirs(gpumon_dir: Option<&OsStr>, xdg: Option<&OsStr>, uid: u32) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    if let Some(d) = gpumon_dir.filter(|d| !d.is_empty()) {
        add(PathBuf::from(d));
    }
    if let Some(x) = xdg.filter(|x| !x.is_empty()) {
        add(Path::new(x).join("gpumon"));
    }
    add(PathBuf::from(format!("/run/user/{uid}/gpumon")));
    add(PathBuf::from(format!("/tmp/gpumon-{uid}")));
    out
}

/// Every directory this monitor should look at: its own user's, and when it
/// runs as root, every user's default places.
pub fn scan_dirs() -> Vec<PathBuf> {
    let uid = own_uid();
    let mut dirs = candidate_dirs(
        std::env::var_os("GPUMON_DIR").as_deref(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        uid,
    );
    if uid == 0 {
        for (parent, prefix, suffix) in [("/tmp", "gpumon-", ""), ("/run/user", "", "gpumon")] {
            let Ok(rd) = std::fs::read_dir(parent) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                // Only per-uid directories (`gpumon-1000`, `/run/user/1000`): other
                // names are not ours to judge, so they are skipped, not refused.
                let Some(rest) = name.strip_prefix(prefix) else {
                    continue;
                };
                if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let p = if suffix.is_empty() {
                    e.path()
                } else {
                    e.path().join(suffix)
                };
                if !dirs.contains(&p) {
                    dirs.push(p);
                }
            }
        }
    }
    dirs
}

/// Check a socket directory before trusting anything in it; returns its owner.
/// Refused: not a directory (a symlink counts as not), group/other access,
/// or owned by someone other than us (unless we are root).
pub fn check_dir(path: &Path, own: u32) -> Result<u32, String> {
    let md = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !md.is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    let mode = md.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} has mode {mode:o}; must be accessible by its owner only (0700)",
            path.display()
        ));
    }
    if md.uid() != own && own != 0 {
        return Err(format!(
            "{} belongs to uid {}, not to this user ({own})",
            path.display(),
            md.uid()
        ));
    }
    Ok(md.uid())
}

/// `1234.sock` (companion) or `1234.driver.sock` (interposer) → 1234.
pub fn sock_pid(name: &OsStr) -> Option<u32> {
    let s = name.to_str()?.strip_suffix(".sock")?;
    let s = s.strip_suffix(".driver").unwrap_or(s);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&p| p > 0)
}

pub fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_rule() {
        assert!(peer_allowed(1000, 1000, 1000));
        assert!(peer_allowed(1000, 0, 1000), "root companion is trusted");
        assert!(!peer_allowed(1000, 1001, 1000));
        assert!(
            !peer_allowed(1000, 1001, 1001),
            "non-root never watches others"
        );
        assert!(
            peer_allowed(0, 1001, 1001),
            "root watches a user in their own dir"
        );
        assert!(
            !peer_allowed(0, 1001, 1002),
            "but not a socket planted in another's dir"
        );
    }

    #[test]
    fn candidates_cover_every_place_a_companion_may_use() {
        let d = candidate_dirs(Some(OsStr::new("/x")), Some(OsStr::new("/run/user/7")), 7);
        assert_eq!(
            d,
            vec![
                PathBuf::from("/x"),
                PathBuf::from("/run/user/7/gpumon"),
                PathBuf::from("/tmp/gpumon-7")
            ]
        );
        let d = candidate_dirs(None, Some(OsStr::new("")), 3);
        assert_eq!(d[0], PathBuf::from("/run/user/3/gpumon"));
    }

    #[test]
    fn socket_names() {
        assert_eq!(sock_pid(OsStr::new("123.sock")), Some(123));
        assert_eq!(sock_pid(OsStr::new("123.driver.sock")), Some(123));
        assert_eq!(sock_pid(OsStr::new("123.other.sock")), None);
        assert_eq!(sock_pid(OsStr::new("0.sock")), None);
        assert_eq!(sock_pid(OsStr::new("-1.sock")), None);
        assert_eq!(sock_pid(OsStr::new("12a.sock")), None);
        assert_eq!(sock_pid(OsStr::new(".sock")), None);
        assert_eq!(sock_pid(OsStr::new("99999999999.sock")), None);
    }

    #[test]
    fn directory_checks() {
        let own = own_uid();
        let tmp = tempfile::tempdir().expect("temp dir");
        let d = tmp.path().join("g");
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(
            check_dir(&d, own).is_err(),
            "group/other readable is refused"
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(check_dir(&d, own), Ok(own));
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(&d, &link).expect("symlink");
        assert!(check_dir(&link, own).is_err(), "a symlink is not followed");
        if own != 0 {
            assert!(check_dir(&d, own + 1).is_err());
        }
    }
}
