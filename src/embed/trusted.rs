//! A directory nobody else can swap: other processes load the cache
//! by path (`LD_PRELOAD`, `PYTHONPATH`), so every component of that path, from `/` down,
//! must be out of other users' reach. Each component is opened with `openat` and
//! `O_NOFOLLOW` relative to the one above it and checked on its descriptor:
//! - owned by root or by this user;
//! - not writable by group or others, unless sticky (`/tmp`): there others may add names
//!   but not rename or remove ours, and the next component must itself be ours or root's;
//! - a symbolic link is followed only after the same checks, so it cannot be replaced.
//!
//! What passes can be reached only through directories that just root and this user can
//! change, so a path into it stays what was checked when the program opens it later.
//! Hand-written: the one crate family that walks like this (`cap-std`) would replace
//! every file call of the cache, and ours are six.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Symbolic links followed on one path at most (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Why a path cannot hold code that other processes load.
pub(crate) type Refusal = String;

pub(crate) fn stat_fd(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: fstat fills the zeroed struct for a valid descriptor.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

pub(crate) fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::other("NUL in a file name"))
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC)`.
pub(crate) fn open_at(dir: &OwnedFd, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: a valid C string and descriptor; the result is checked.
    let raw = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn open_root() -> io::Result<OwnedFd> {
    // SAFETY: a constant path; the result is checked.
    let raw = unsafe {
        libc::open(
            c"/".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The rule for one component, given its directory's mode (`parent_mode`).
pub(crate) fn component_rule(
    shown: &Path,
    st_uid: u32,
    st_mode: u32,
    own: u32,
) -> Result<(), Refusal> {
    if st_uid != 0 && st_uid != own {
        return Err(format!(
            "{} belongs to uid {st_uid}: only root and you may own the directories above a cache",
            shown.display()
        ));
    }
    let is_dir = st_mode & libc::S_IFMT == libc::S_IFDIR;
    if is_dir && st_mode & 0o022 != 0 && st_mode & libc::S_ISVTX == 0 {
        return Err(format!(
            "{} is writable by {} (mode {:o}): another user could swap what is below it",
            shown.display(),
            if st_mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            st_mode & 0o7777
        ));
    }
    Ok(())
}

/// Open the directory `path` (absolute) through checked components only; the returned
/// descriptor is the directory itself (`O_PATH`). `Ok(None)`: a component is missing
/// (`missing` is then the first one that is, under a checked parent).
pub(crate) fn walk(path: &Path, own: u32) -> Result<Walked, Refusal> {
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, path);
    let mut fd = open_root().map_err(|e| format!("/: {e}"))?;
    let mut shown = PathBuf::from("/");
    check_fd(&fd, &shown, own)?;
    let mut links = 0;
    // `todo` holds the components still to walk, last first.
    while let Some(c) = todo.pop() {
        if c == "/" {
            fd = open_root().map_err(|e| format!("/: {e}"))?;
            shown = PathBuf::from("/");
            continue;
        }
        let next = match open_at(&fd, &c, libc::O_PATH, 0) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let rest: Vec<OsString> = todo.into_iter().rev().collect();
                return Ok(Walked::Missing {
                    parent: fd,
                    parent_shown: shown,
                    name: c,
                    rest,
                });
            }
            Err(e) => return Err(format!("{}: {e}", shown.join(&c).display())),
        };
        let here = if c == ".." {
            shown
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(shown.clone())
        } else {
            shown.join(&c)
        };
        let st = stat_fd(&next).map_err(|e| format!("{}: {e}", here.display()))?;
        component_rule(&here, st.st_uid, st.st_mode, own)?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => {
                fd = next;
                shown = here;
            }
            libc::S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(format!("{}: too many symbolic links", path.display()));
                }
                let target =
                    read_link_at(&fd, &c).map_err(|e| format!("{}: {e}", here.display()))?;
                // The link's own directory was checked, so the link cannot change;
                // its target is walked with the same checks.
                push_components(&mut todo, &target);
            }
            _ => return Err(format!("{} is not a directory", here.display())),
        }
    }
    Ok(Walked::Found { dir: fd })
}

pub(crate) enum Walked {
    Found {
        dir: OwnedFd,
    },
    Missing {
        parent: OwnedFd,
        parent_shown: PathBuf,
        name: OsString,
        rest: Vec<OsString>,
    },
}

fn check_fd(fd: &OwnedFd, shown: &Path, own: u32) -> Result<(), Refusal> {
    let st = stat_fd(fd).map_err(|e| format!("{}: {e}", shown.display()))?;
    component_rule(shown, st.st_uid, st.st_mode, own)
}

/// Push `p`'s components so that popping walks them in order ("/" restarts at the root).
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    let mut parts: Vec<OsString> = Vec::new();
    for c in p.components() {
        match c {
            Component::RootDir => parts.push("/".into()),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => parts.push("..".into()),
            Component::Normal(n) => parts.push(n.to_os_string()),
        }
    }
    todo.extend(parts.into_iter().rev());
}

fn read_link_at(dir: &OwnedFd, name: &OsStr) -> io::Result<PathBuf> {
    let c = cstr(name)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: the buffer is valid for its length; the result is checked.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

/// `path`, checked from `/` down, created (mode 0700) where it is missing; the
/// directory's descriptor. Every directory gpumon makes or uses inside is checked too.
pub(crate) fn open_dir(path: &Path, own: u32) -> Result<OwnedFd, Refusal> {
    match walk(path, own)? {
        Walked::Found { dir } => Ok(dir),
        Walked::Missing {
            mut parent,
            mut parent_shown,
            name,
            rest,
        } => {
            for part in std::iter::once(name).chain(rest) {
                if part == ".." || part == "/" {
                    return Err(format!(
                        "{}: a path through a missing directory",
                        path.display()
                    ));
                }
                parent = sub_dir(&parent, &parent_shown, &part, own)?;
                parent_shown = parent_shown.join(&part);
            }
            Ok(parent)
        }
    }
}

/// The subdirectory `name` of the checked `dir`, made private if missing, and checked:
/// a directory (not a link), this user's, not writable by others.
pub(crate) fn sub_dir(
    dir: &OwnedFd,
    shown: &Path,
    name: &OsStr,
    own: u32,
) -> Result<OwnedFd, Refusal> {
    let here = shown.join(name);
    let c = cstr(name).map_err(|e| format!("{}: {e}", here.display()))?;
    // SAFETY: a valid C string and descriptor. EEXIST is the common case.
    let made = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) };
    if made != 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(format!("creating {}: {e}", here.display()));
        }
    }
    let fd = open_at(dir, name, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTDIR) || e.raw_os_error() == Some(libc::ELOOP) {
            format!(
                "{} is not a directory (a link is not followed)",
                here.display()
            )
        } else {
            format!("{}: {e}", here.display())
        }
    })?;
    let st = stat_fd(&fd).map_err(|e| format!("{}: {e}", here.display()))?;
    if st.st_uid != own || st.st_mode & 0o022 != 0 {
        return Err(format!(
            "{} must be a directory owned by you and not writable by others (uid {}, mode {:o})",
            here.display(),
            st.st_uid,
            st.st_mode & 0o7777
        ));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn own() -> u32 {
        crate::channel::dirs::own_uid()
    }

    #[test]
    fn a_private_tree_is_walked_and_made() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = tmp.path().join("a/b/gpumon");
        assert!(open_dir(&p, own()).is_ok());
        assert!(p.is_dir());
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(tmp.path().join("a"), &link).expect("symlink");
        assert!(
            open_dir(&link.join("b/gpumon"), own()).is_ok(),
            "a checked link is followed"
        );
    }

    #[test]
    fn a_directory_others_can_write_is_refused_anywhere_above() {
        let tmp = tempfile::tempdir().expect("tmp");
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = open_dir(&shared.join("cache/gpumon"), own()).expect_err("refused");
        assert!(e.contains("writable by everyone"), "{e}");
        // Sticky (as /tmp) is fine: others cannot rename or remove what is ours.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        assert!(open_dir(&shared.join("cache/gpumon"), own()).is_ok());
        let inner = shared.join("cache/gpumon/preload-x");
        std::fs::create_dir(&inner).expect("mkdir");
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let dir = open_dir(&shared.join("cache/gpumon"), own()).expect("root ok");
        let e = sub_dir(&dir, &shared, OsStr::new("preload-x"), own()).expect_err("refused");
        assert!(e.contains("not writable by others"), "{e}");
    }

    #[test]
    fn a_symlinked_subdirectory_is_not_followed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("gpumon");
        let dir = open_dir(&root, own()).expect("made");
        std::os::unix::fs::symlink(tmp.path(), root.join("preload-x")).expect("symlink");
        let e = sub_dir(&dir, &root, OsStr::new("preload-x"), own()).expect_err("refused");
        assert!(e.contains("link"), "{e}");
    }

    #[test]
    fn another_users_component_is_refused() {
        if own() != 0 {
            return; // making another user's directory needs root
        }
        let tmp = tempfile::tempdir().expect("tmp");
        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let e = open_dir(&theirs.join("gpumon"), own()).expect_err("refused");
        assert!(e.contains("belongs to uid 65534"), "{e}");
    }
}
