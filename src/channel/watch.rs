//! What wakes the scanner when a socket directory may have changed, so that between changes
//! the channel's thread sleeps: on the measured virtual machines a wake-up costs ~50-90 us of
//! CPU, and looking every second was a measurable share of gpumon's whole cost.
//!
//! Every directory a scan looked at is watched with inotify; one that does not exist (or is
//! not a directory) is awaited from its nearest existing ancestor, by name, since the only
//! change there that matters is its appearance (`/tmp` is busy, `/run/user/<uid>` may not
//! exist for a user who is not logged in). Where a directory cannot be watched at all (no
//! inotify, the watch limit, no permission) the set is incomplete and the scanner looks
//! every `scan_interval` as it did before: nothing is seen later than it was then.
//!
//! Raw inotify on tokio's `AsyncFd`, as `ticker` does its timerfd: the `inotify` crate
//! would add three crates for what is three system calls and a header to parse.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::scan::DirKey;

/// In a looked-at directory: an entry made, renamed in or out, removed, or its attributes or
/// the directory's own changed (a chmod makes a refused directory acceptable, or a socket
/// worth retrying); or the directory itself removed or renamed away.
const WHOLE: u32 = libc::IN_CREATE
    | libc::IN_MOVED_TO
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;
/// In the ancestor of a missing one: an entry made or renamed in (the awaited one, or not:
/// the name says); or the ancestor itself gone, which may put the awaited one elsewhere.
const AWAIT: u32 = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

/// One event's header; its name (NUL-padded to `len` bytes) follows it.
const HEADER: usize = std::mem::size_of::<libc::inotify_event>();

#[derive(Default)]
struct Watched {
    /// A looked-at directory: every event in it may change what a scan finds.
    whole: bool,
    /// Entries awaited in it: the next step down to a looked-at directory that is missing.
    awaited: HashSet<OsString>,
    events: u32,
}

pub(crate) struct Watch {
    fd: Option<AsyncFd<OwnedFd>>,
    /// What each watch descriptor stands for (several paths may share one: the same inode).
    wds: HashMap<RawFd, Watched>,
    /// The directories the watches are for, and the inode each was: the same again needs
    /// no system call.
    armed_for: Vec<(PathBuf, Option<(u64, u64)>)>,
    complete: bool,
    /// The kernel dropped a watch (its directory removed, renamed or unmounted): the next
    /// `arm` sets them again even for the same directories.
    stale: bool,
}

impl Watch {
    /// A watch on nothing yet; `enabled: false`, or an inotify that cannot be had, makes
    /// one that never wakes and is never complete. Must be called inside a tokio runtime.
    pub(crate) fn new(enabled: bool) -> Watch {
        let fd = enabled.then(init).and_then(Result::ok).and_then(|fd| {
            // SAFETY: an OwnedFd is open and keeps its descriptor until the AsyncFd drops it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
        });
        Watch {
            fd,
            wds: HashMap::new(),
            armed_for: Vec::new(),
            complete: false,
            stale: false,
        }
    }

    /// Watch the directories a scan looked at, in place of the ones watched before; whether
    /// every one of them is (else the scanner must keep looking on its own). `again`: set
    /// them even if nothing says they moved (no event tells of an ancestor renamed away,
    /// which leaves a watch on what is no longer at the path).
    pub(crate) fn arm(&mut self, looked: &[(PathBuf, DirKey)], again: bool) -> bool {
        let Some(fd) = self.fd.as_ref().map(|f| f.get_ref().as_raw_fd()) else {
            return false;
        };
        let same = looked.len() == self.armed_for.len()
            && looked
                .iter()
                .zip(&self.armed_for)
                .all(|((p, k), (a, id))| p == a && inode(k) == *id);
        if same && !self.stale && !again {
            return self.complete;
        }
        let mut new: HashMap<RawFd, Watched> = HashMap::new();
        let mut complete = true;
        for (path, _) in looked {
            complete &= add(fd, &mut new, path);
        }
        for wd in self.wds.keys().filter(|wd| !new.contains_key(wd)) {
            // SAFETY: removes one of our watches from our own inotify fd.
            unsafe { libc::inotify_rm_watch(fd, *wd) };
        }
        self.wds = new;
        self.armed_for = looked.iter().map(|(p, k)| (p.clone(), inode(k))).collect();
        self.complete = complete;
        self.stale = false;
        complete
    }

    /// Waits for an event that may change what a scan finds (and never, without inotify).
    pub(crate) async fn changed(&mut self) {
        let Some(afd) = &self.fd else {
            return std::future::pending().await;
        };
        let raw = afd.get_ref().as_raw_fd();
        let mut buf = Buf([0; 4096]);
        loop {
            let Ok(mut ready) = afd.readable().await else {
                // The runtime is shutting down.
                return std::future::pending().await;
            };
            let mut relevant = false;
            loop {
                // SAFETY: reads at most the buffer's length into it from our own inotify fd.
                let n = unsafe { libc::read(raw, buf.0.as_mut_ptr().cast(), buf.0.len()) };
                let Ok(n @ 1..) = usize::try_from(n) else {
                    break; // EAGAIN: every queued event is read
                };
                relevant |= events(&buf.0[..n], raw, &mut self.wds, &mut self.stale);
            }
            // Drained: the next wait is for the runtime to see it readable again.
            ready.clear_ready();
            if relevant {
                return;
            }
        }
    }
}

fn inode(k: &DirKey) -> Option<(u64, u64)> {
    k.map(|(dev, ino, ..)| (dev, ino))
}

/// inotify events are read whole, aligned as their header wants.
#[repr(C, align(8))]
struct Buf([u8; 4096]);

fn init() -> io::Result<OwnedFd> {
    // SAFETY: plain flags; returns a new fd or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd was just returned to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watch `path` itself, or else await it from its nearest existing ancestor; false when
/// neither can be (then only looking finds its changes).
fn add(fd: RawFd, new: &mut HashMap<RawFd, Watched>, path: &Path) -> bool {
    // Not followed: a symlink in a socket directory's place is refused (`dirs::check_dir`),
    // and what its target does is no news; its replacement shows in the parent.
    match add_watch(fd, new, path, WHOLE | libc::IN_DONT_FOLLOW) {
        Ok(w) => {
            w.whole = true;
            return true;
        }
        Err(e) if missing(&e) => {}
        Err(_) => return false,
    }
    let mut child = path;
    loop {
        let (Some(parent), Some(name)) = (child.parent(), child.file_name()) else {
            return false;
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        match add_watch(fd, new, parent, AWAIT) {
            Ok(w) => {
                w.awaited.insert(name.to_os_string());
                return true;
            }
            Err(e) if missing(&e) => child = parent,
            Err(_) => return false,
        }
    }
}

/// Not there, or not a directory: look one step up.
fn missing(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR))
}

/// A watch for `path` with at least `mask` (directories only), merged with what another path
/// of the same inode asked for in this arming.
fn add_watch<'a>(
    fd: RawFd,
    new: &'a mut HashMap<RawFd, Watched>,
    path: &Path,
    mask: u32,
) -> io::Result<&'a mut Watched> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let call = |mask: u32| {
        // SAFETY: a NUL-terminated path and plain flags on our own inotify fd.
        let wd = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), mask | libc::IN_ONLYDIR) };
        if wd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(wd)
        }
    };
    let follow = mask & libc::IN_DONT_FOLLOW;
    let events = mask & !libc::IN_DONT_FOLLOW;
    let wd = call(events | follow)?;
    let w = new.entry(wd).or_default();
    // Adding replaced the events another path of this inode asked for: ask for both.
    if w.events | events != events {
        call(w.events | events | follow)?;
    }
    w.events |= events;
    Ok(w)
}

/// Whether any of `buf`'s events may change what a scan finds; forgets the watches the
/// kernel dropped.
fn events(buf: &[u8], fd: RawFd, wds: &mut HashMap<RawFd, Watched>, stale: &mut bool) -> bool {
    let mut relevant = false;
    let mut off = 0;
    while off + HEADER <= buf.len() {
        // SAFETY: HEADER bytes are in the buffer at `off`; read unaligned, copied out.
        let ev: libc::inotify_event =
            unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
        let len = ev.len as usize;
        let name = buf.get(off + HEADER..off + HEADER + len).unwrap_or(&[]);
        let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
        off += HEADER + len;
        if ev.mask & libc::IN_Q_OVERFLOW != 0 {
            // Events were lost: only a full look knows what they said.
            relevant = true;
            continue;
        }
        let Some(w) = wds.get(&ev.wd) else {
            continue; // a watch removed since (its IN_IGNORED, or events queued before)
        };
        if ev.mask & libc::IN_IGNORED != 0 {
            wds.remove(&ev.wd);
            *stale = true;
            relevant = true;
        } else if ev.mask & libc::IN_MOVE_SELF != 0 {
            // The watch went with the directory, now elsewhere: what is at the path is new.
            // SAFETY: removes one of our watches from our own inotify fd.
            unsafe { libc::inotify_rm_watch(fd, ev.wd) };
            wds.remove(&ev.wd);
            *stale = true;
            relevant = true;
        } else if ev.mask & (libc::IN_DELETE_SELF | libc::IN_UNMOUNT) != 0 {
            // Its IN_IGNORED follows.
            *stale = true;
            relevant = true;
        } else if !name.is_empty() && w.awaited.contains(OsStr::from_bytes(name)) {
            // One step nearer a missing directory: the watches move down with it.
            *stale = true;
            relevant = true;
        } else if w.whole {
            relevant = true;
        }
    }
    relevant
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn looked(paths: &[&Path]) -> Vec<(PathBuf, DirKey)> {
        paths.iter().map(|p| (p.to_path_buf(), None)).collect()
    }

    async fn wakes(w: &mut Watch, within: Duration) -> bool {
        tokio::time::timeout(within, w.changed()).await.is_ok()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_entry_in_a_watched_directory_wakes_it() {
        let d = tempfile::tempdir().expect("tmp");
        let mut w = Watch::new(true);
        assert!(w.arm(&looked(&[d.path()]), false));
        assert!(
            !wakes(&mut w, Duration::from_millis(50)).await,
            "nothing yet"
        );
        std::fs::write(d.path().join("1.sock"), b"").expect("file");
        assert!(wakes(&mut w, Duration::from_secs(2)).await);
        std::fs::remove_file(d.path().join("1.sock")).expect("rm");
        assert!(wakes(&mut w, Duration::from_secs(2)).await, "a removal too");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_missing_directory_is_awaited_by_name_from_its_nearest_ancestor() {
        let d = tempfile::tempdir().expect("tmp");
        let want = d.path().join("a").join("gpumon");
        let mut w = Watch::new(true);
        assert!(w.arm(&looked(&[&want]), false));
        std::fs::create_dir(d.path().join("other")).expect("mkdir");
        assert!(
            !wakes(&mut w, Duration::from_millis(100)).await,
            "another name in the ancestor is no news"
        );
        std::fs::create_dir(d.path().join("a")).expect("mkdir");
        assert!(
            wakes(&mut w, Duration::from_secs(2)).await,
            "one step nearer"
        );
        // The scan that follows arms again: now `a` awaits `gpumon`.
        assert!(w.stale);
        assert!(w.arm(&looked(&[&want]), false));
        assert!(!w.wds.values().any(|v| v.awaited.contains(OsStr::new("a"))));
        assert!(
            w.wds
                .values()
                .any(|v| v.awaited.contains(OsStr::new("gpumon")))
        );
        std::fs::create_dir(&want).expect("mkdir");
        assert!(wakes(&mut w, Duration::from_secs(2)).await);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_removed_directory_wakes_it_and_marks_the_watches_stale() {
        let d = tempfile::tempdir().expect("tmp");
        let sub = d.path().join("g");
        std::fs::create_dir(&sub).expect("mkdir");
        let mut w = Watch::new(true);
        assert!(w.arm(&looked(&[&sub]), false));
        std::fs::remove_dir(&sub).expect("rmdir");
        assert!(wakes(&mut w, Duration::from_secs(2)).await);
        // IN_IGNORED may come in a later read; either way the watch is stale.
        let _ = wakes(&mut w, Duration::from_millis(50)).await;
        assert!(w.stale);
        assert!(
            w.arm(&looked(&[&sub]), false),
            "awaited from the parent now"
        );
        std::fs::create_dir(&sub).expect("mkdir");
        assert!(wakes(&mut w, Duration::from_secs(2)).await);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stale_watches_are_removed_and_disabled_is_never_complete() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        let mut w = Watch::new(true);
        assert!(w.arm(&looked(&[a.path(), b.path()]), false));
        assert_eq!(w.wds.len(), 2);
        assert!(w.arm(&looked(&[b.path()]), false));
        assert_eq!(w.wds.len(), 1);
        std::fs::write(a.path().join("1.sock"), b"").expect("file");
        assert!(
            !wakes(&mut w, Duration::from_millis(100)).await,
            "a directory no longer looked at is no longer watched"
        );
        let mut off = Watch::new(false);
        assert!(!off.arm(&looked(&[b.path()]), false));
        assert!(!wakes(&mut off, Duration::from_millis(50)).await);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_directory_replaced_behind_a_renamed_ancestor_is_watched_anew() {
        let d = tempfile::tempdir().expect("tmp");
        let g = d.path().join("a").join("g");
        std::fs::create_dir_all(&g).expect("mkdir");
        let keyed = |p: &Path| vec![(p.to_path_buf(), super::super::scan::dir_key(p))];
        let mut w = Watch::new(true);
        assert!(w.arm(&keyed(&g), false));
        // No event tells of it: the watch goes with the old `g`, now under `b`.
        std::fs::rename(d.path().join("a"), d.path().join("b")).expect("mv");
        std::fs::create_dir_all(&g).expect("mkdir");
        assert!(w.arm(&keyed(&g), false), "another inode at the path");
        let _ = wakes(&mut w, Duration::from_millis(50)).await;
        std::fs::write(g.join("1.sock"), b"").expect("file");
        assert!(wakes(&mut w, Duration::from_secs(2)).await);
    }
}
