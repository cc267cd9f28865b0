//! Where companions put their sockets, and who may talk to whom.
//! The rules mirror `python/gpumon/_paths.py`; docs/protocol.md is the contract.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
pub fn candidate_dirs(
    places: &Places,
    gpumon_dir: Option<&OsStr>,
    xdg: Option<&OsStr>,
    uid: u32,
) -> Vec<PathBuf> {
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
    add(places.run_user.join(uid.to_string()).join("gpumon"));
    add(places.tmp.join(format!("gpumon-{uid}")));
    out
}

/// The roots of the default places (tests point them at a temporary tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    pub tmp: PathBuf,
    pub run_user: PathBuf,
    pub proc: PathBuf,
}

impl Default for Places {
    fn default() -> Self {
        Places {
            tmp: PathBuf::from("/tmp"),
            run_user: PathBuf::from("/run/user"),
            proc: PathBuf::from("/proc"),
        }
    }
}

/// Most directories one scan looks at (distinct users with a process, times two).
pub const MAX_DIRS: usize = 1024;

/// A directory to scan, and whose it must be when it is another user's default place
/// (`/tmp/gpumon-1000` made by uid 1001 is a squatter's, not uid 1000's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanDir {
    pub path: PathBuf,
    pub owner: Option<u32>,
}

/// Every directory this monitor should look at: its own user's, and when it runs as
/// root, the default places of every user that has a process now. A companion is a
/// process, so its user has one; `/tmp` is never listed, so directories made for uids
/// that run nothing cost nothing however many there are.
pub fn scan_dirs(places: &Places) -> Vec<ScanDir> {
    scan_dirs_with(places, &mut LiveUids::default())
}

/// `scan_dirs`, with the owners of processes remembered from the scans before (`LiveUids`).
pub fn scan_dirs_with(places: &Places, uids: &mut LiveUids) -> Vec<ScanDir> {
    let uid = own_uid();
    let gpumon_dir = std::env::var_os("GPUMON_DIR");
    let mut dirs: Vec<ScanDir> = candidate_dirs(
        places,
        gpumon_dir.as_deref(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        uid,
    )
    .into_iter()
    .map(|path| {
        // A directory named in GPUMON_DIR is whoever's the user chose; the default
        // places are this user's own, and one made by somebody else is a squatter's.
        let chosen = gpumon_dir.as_deref().is_some_and(|g| path.as_os_str() == g);
        ScanDir {
            path,
            owner: (!chosen).then_some(uid),
        }
    })
    .collect();
    if uid == 0 {
        for other in uids.read(&places.proc, MAX_DIRS / 2) {
            for path in [
                places.run_user.join(other.to_string()).join("gpumon"),
                places.tmp.join(format!("gpumon-{other}")),
            ] {
                if dirs.len() < MAX_DIRS && !dirs.iter().any(|d| d.path == path) {
                    dirs.push(ScanDir {
                        path,
                        owner: Some(other),
                    });
                }
            }
        }
    }
    dirs
}

/// The distinct owners of the processes under `proc` (at most `cap`; the list of
/// processes is bounded by `pid_max`), root's first.
pub fn live_uids(proc: &Path, cap: usize) -> Vec<u32> {
    LiveUids::default().read(proc, cap)
}

/// Time between two listings of `/proc`: the users with a process change rarely, and a
/// listing costs a root monitor ~0.4 ms of a thread woken for it (H200, 182 processes:
/// `getdents` of every process and the hand-over to the blocking pool). Every 10 s that
/// was 7 % of a root monitor's CPU at 1 s, for a fallback: the places of a user
/// already seen are watched, and a change in them is seen at once; only a user with no
/// process before waits for a listing. Time, not scans: a scanner that sleeps until a
/// directory changes scans seldom and unevenly.
const UIDS_LIST_EVERY: Duration = Duration::from_secs(30);
/// Listings of `/proc` before every process is asked for its owner again.
const UIDS_FRESH_EVERY: u32 = 2;
/// Processes whose owner is remembered between scans (more are asked every time).
const UIDS_REMEMBERED: usize = 1 << 16;

/// The owners of processes, remembered between scans. Asking `/proc` for the owner of every
/// process is a `stat` each (~3 us): a root monitor scanning every second on a machine of a
/// few hundred processes spent more on it than on its NVML calls. `/proc` is
/// listed every `UIDS_LIST_EVERY` (the scans between answer from that listing), and only pids
/// new to a listing are asked; so a user whose first process just started is looked for
/// within 30 s, and a process that changes owner (drops root) or a pid reused by another
/// user is seen within 60 s. The monitor's own user's places are looked at on every scan.
#[derive(Debug, Default)]
pub struct LiveUids {
    by_pid: std::collections::HashMap<u32, u32>,
    listed: Vec<u32>,
    listed_at: Option<Instant>,
    scans: u32,
}

impl LiveUids {
    /// When the next `read` lists `/proc` (`None`: the first one does). The scanner wakes
    /// for it: a listing may add directories to look at.
    pub fn next_listing(&self) -> Option<Instant> {
        self.listed_at.map(|t| t + UIDS_LIST_EVERY)
    }

    /// Whether a `read` now lists `/proc` (a scan that skips the directories must not skip
    /// that listing: `channel::Scanner` scans in full then). A second early: the full scan
    /// the scanner owes every 30 s begins just before the listing's time, and a listing left
    /// for a moment later woke both threads a second time for it.
    pub fn listing_due(&self, now: Instant) -> bool {
        self.next_listing()
            .is_none_or(|t| now + Duration::from_secs(1) >= t)
    }

    /// As `live_uids`, from the last listing of `/proc` between listings, and asking only
    /// about processes new to a listing.
    pub fn read(&mut self, proc: &Path, cap: usize) -> Vec<u32> {
        self.read_at(proc, cap, Instant::now())
    }

    fn read_at(&mut self, proc: &Path, cap: usize, now: Instant) -> Vec<u32> {
        if !self.listing_due(now) {
            return self.listed.iter().copied().take(cap).collect();
        }
        self.listed_at = Some(now);
        self.listed = self.list(proc, cap);
        self.listed.clone()
    }

    fn list(&mut self, proc: &Path, cap: usize) -> Vec<u32> {
        let fresh = self.scans.is_multiple_of(UIDS_FRESH_EVERY);
        self.scans = self.scans.wrapping_add(1);
        let mut uids = std::collections::BTreeSet::new();
        let Ok(rd) = std::fs::read_dir(proc) else {
            self.by_pid.clear();
            return Vec::new();
        };
        let mut seen = std::collections::HashMap::with_capacity(self.by_pid.len());
        for e in rd.flatten() {
            if uids.len() >= cap {
                break;
            }
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let known = if fresh {
                None
            } else {
                self.by_pid.get(&pid).copied()
            };
            let uid = match known {
                Some(u) => u,
                None => match e.metadata() {
                    Ok(m) => m.uid(),
                    Err(_) => continue,
                },
            };
            uids.insert(uid);
            if seen.len() < UIDS_REMEMBERED {
                seen.insert(pid, uid);
            }
        }
        self.by_pid = seen;
        uids.into_iter().collect()
    }
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
        let d = candidate_dirs(
            &Places::default(),
            Some(OsStr::new("/x")),
            Some(OsStr::new("/run/user/7")),
            7,
        );
        assert_eq!(
            d,
            vec![
                PathBuf::from("/x"),
                PathBuf::from("/run/user/7/gpumon"),
                PathBuf::from("/tmp/gpumon-7")
            ]
        );
        let d = candidate_dirs(&Places::default(), None, Some(OsStr::new("")), 3);
        assert_eq!(d[0], PathBuf::from("/run/user/3/gpumon"));
    }

    #[test]
    fn users_with_a_process_are_found_in_proc_and_others_are_not_looked_for() {
        let uids = live_uids(Path::new("/proc"), 1000);
        assert!(uids.contains(&own_uid()), "{uids:?}");
        let fake = tempfile::tempdir().expect("tmp");
        for name in ["12", "self", "x1"] {
            std::fs::create_dir(fake.path().join(name)).expect("mkdir");
        }
        assert_eq!(
            live_uids(fake.path(), 10),
            vec![own_uid()],
            "only numeric entries"
        );
        assert!(live_uids(Path::new("/proc"), 1).len() == 1, "capped");
    }

    #[test]
    fn owners_are_remembered_between_scans_and_asked_again_now_and_then() {
        let fake = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(fake.path().join("12")).expect("mkdir");
        let mut uids = LiveUids::default();
        // One listing, then the scans until a second before the next: they answer the same
        // whatever changed.
        let mut now = Instant::now();
        let mut list = |u: &mut LiveUids| {
            let first = u.read_at(fake.path(), 10, now);
            for _ in 1..UIDS_LIST_EVERY.as_secs() - 1 {
                now += Duration::from_secs(1);
                assert_eq!(u.read_at(fake.path(), 10, now), first, "between listings");
            }
            now += Duration::from_secs(2);
            first
        };
        assert_eq!(list(&mut uids), vec![own_uid()]);
        // A remembered owner is not asked again until a fresh listing: one planted here
        // (as if pid 12 had changed owner) is what the listings before it answer.
        uids.by_pid.insert(12, 4242);
        assert_eq!(list(&mut uids), vec![4242], "remembered");
        for _ in 2..UIDS_FRESH_EVERY {
            list(&mut uids);
        }
        assert_eq!(list(&mut uids), vec![own_uid()], "asked again");
        std::fs::create_dir(fake.path().join("13")).expect("mkdir");
        uids.by_pid.insert(12, 4242);
        let got = list(&mut uids);
        assert!(
            got.contains(&own_uid()) && got.contains(&4242),
            "a new pid is asked at once: {got:?}"
        );
        std::fs::remove_dir(fake.path().join("12")).expect("rmdir");
        assert_eq!(list(&mut uids), vec![own_uid()], "a gone pid is forgotten");
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
