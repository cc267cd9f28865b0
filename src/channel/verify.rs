//! Who is at the other end of a companion socket.
//!
//! A root gpumon scans every user's directory, so a socket file is a claim made
//! by whoever could write there. Before gpumon writes a byte to it or believes
//! a byte from it:
//! - the file is opened with `O_PATH | O_NOFOLLOW` and checked on that handle:
//!   a socket (a symlink is refused, so a user cannot point root's gpumon at a
//!   root-only socket elsewhere — the confused deputy), owned by the
//!   directory's owner, by us, or by root;
//! - gpumon connects through `/proc/self/fd/N`, i.e. to exactly the inode it
//!   checked, so the file cannot be swapped between the check and the connect;
//! - the peer's `SO_PEERCRED` pid must be the pid in the file name (the kernel
//!   reports it in our pid namespace), so a user cannot publish data under
//!   another process's pid (impersonation);
//! - and since that pid may name a listener's creator long gone, the process must
//!   be alive, older than the socket, and hold our connection's other end
//!   (`liveness`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The socket file, opened without following links and checked.
pub(crate) struct Checked {
    fd: OwnedFd,
}

impl Checked {
    /// The path that reaches exactly the checked inode.
    pub(crate) fn connect_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// The checked file itself (for its time stamps).
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }
}

/// Why a socket file is not connected to.
pub(crate) enum FileProblem {
    /// Gone, or not a socket at all (a regular file, a FIFO): nothing listens
    /// there, as with a stale socket; said nowhere.
    Gone(String),
    /// A link, or someone else's socket: refused, and the status line says so.
    Refused(String),
}

/// Open `path` as a handle (no I/O possible through it) and check what it is.
pub(crate) fn check_file(path: &Path, dir_owner: u32, own: u32) -> Result<Checked, FileProblem> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| FileProblem::Gone(format!("{}: NUL in path", path.display())))?;
    // SAFETY: a valid C string; O_PATH opens no file contents and runs no device code.
    let raw = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(FileProblem::Gone(format!(
            "{}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: fstat fills the zeroed struct for a valid descriptor.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(FileProblem::Gone(format!(
                "{}: {}",
                path.display(),
                std::io::Error::last_os_error()
            )));
        }
        st
    };
    let kind = st.st_mode & libc::S_IFMT;
    if kind != libc::S_IFSOCK && kind != libc::S_IFLNK {
        return Err(FileProblem::Gone(format!(
            "{}: not a socket",
            path.display()
        )));
    }
    file_rule(st.st_mode, st.st_uid, dir_owner, own)
        .map_err(|why| FileProblem::Refused(format!("{} {why}", path.display())))?;
    Ok(Checked { fd })
}

/// What a socket file must be: a socket (not a link to one), owned by the
/// directory's owner, by this user, or by root.
pub(crate) fn file_rule(mode: u32, uid: u32, dir_owner: u32, own: u32) -> Result<(), String> {
    match mode & libc::S_IFMT {
        libc::S_IFSOCK => {}
        libc::S_IFLNK => return Err("is a symbolic link, not a socket".into()),
        _ => return Err("is not a socket".into()),
    }
    if uid != dir_owner && uid != own && uid != 0 {
        return Err(format!(
            "belongs to uid {uid}, not to the directory's owner ({dir_owner})"
        ));
    }
    Ok(())
}

/// The peer pid must be the one the file is named after. A pid of 0 means the
/// peer lives in a pid namespace we cannot see into: it cannot be verified.
pub(crate) fn pid_rule(named: u32, peer: Option<i32>) -> Result<(), String> {
    match peer {
        Some(p) if p > 0 && p as u32 == named => Ok(()),
        Some(p) if p > 0 => Err(format!("is served by pid {p}, not by pid {named}")),
        _ => Err("has a peer whose pid cannot be seen from here".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rules() {
        assert!(file_rule(libc::S_IFSOCK | 0o600, 1000, 1000, 0).is_ok());
        assert!(file_rule(libc::S_IFSOCK | 0o600, 0, 1000, 0).is_ok());
        assert!(file_rule(libc::S_IFLNK | 0o777, 1000, 1000, 0).is_err());
        assert!(file_rule(libc::S_IFREG | 0o600, 1000, 1000, 0).is_err());
        assert!(
            file_rule(libc::S_IFSOCK | 0o600, 1001, 1000, 0).is_err(),
            "a socket of another user in this user's directory"
        );
    }

    #[test]
    fn pid_rules() {
        assert!(pid_rule(42, Some(42)).is_ok());
        assert!(pid_rule(42, Some(43)).is_err());
        assert!(pid_rule(42, Some(0)).is_err());
        assert!(pid_rule(42, None).is_err());
    }
}
