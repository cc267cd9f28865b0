//! One look at the socket directories, made off the channel's thread:
//! however many files or directories a user makes, a scan reads a bounded number of
//! entries, and the connections on the channel's thread go on meanwhile.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::dirs::{self, LiveUids, Places, ScanDir};

/// Entries read from one directory per scan: a user who fills their own directory
/// hides only their own companions past this many.
pub(crate) const MAX_ENTRIES_PER_DIR: usize = 2048;
/// Socket files one scan reports, all directories together.
pub(crate) const MAX_FOUND: usize = 16_384;

/// Identity of a socket file, so a refused one is retried only once replaced.
pub(crate) type FileId = (u64, u64, i64);

/// What a directory looked like to a scan: device, inode, and the modification and change
/// times (to the ns). An entry added, removed or renamed moves the mtime, a chmod or chown
/// the ctime; `None`: it did not exist (or could not be looked at).
pub(crate) type DirKey = Option<(u64, u64, i64, i64, i64, i64)>;

pub(crate) fn dir_key(path: &Path) -> DirKey {
    std::fs::symlink_metadata(path).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

/// Whether every directory a scan looked at still looks the same (one `lstat` each): then
/// a new scan would find what that one found.
pub(crate) fn unchanged(looked: &[(PathBuf, DirKey)]) -> bool {
    looked.iter().all(|(p, k)| dir_key(p) == *k)
}

/// A socket file that may be a companion's.
pub(crate) struct Found {
    pub path: PathBuf,
    pub pid: u32,
    pub dir_owner: u32,
    pub id: Option<FileId>,
}

#[derive(Default)]
pub(crate) struct Scan {
    pub found: Vec<Found>,
    /// Directories refused, with why (each said once by the scanner).
    pub problems: Vec<(PathBuf, String)>,
    /// Every directory looked at, as it was before it was read (`unchanged`).
    pub looked: Vec<(PathBuf, DirKey)>,
}

/// Look at `explicit` directories, or else at the default places (`dirs::scan_dirs`).
pub(crate) fn run(
    explicit: Option<Vec<PathBuf>>,
    places: &Places,
    own_uid: u32,
    uids: &mut LiveUids,
) -> Scan {
    let is_explicit = explicit.is_some();
    let dirs = match explicit {
        Some(d) => d
            .into_iter()
            .map(|path| ScanDir { path, owner: None })
            .collect(),
        None => dirs::scan_dirs_with(places, uids),
    };
    let mut out = Scan::default();
    for d in dirs {
        if out.found.len() >= MAX_FOUND {
            break;
        }
        // Before the directory is read: a change while it is read shows at the next look.
        out.looked.push((d.path.clone(), dir_key(&d.path)));
        let owner = match dirs::check_dir(&d.path, own_uid) {
            Ok(o) => o,
            Err(e) => {
                // Default places that do not exist are normal.
                if is_explicit || std::fs::symlink_metadata(&d.path).is_ok() {
                    out.problems.push((d.path, e));
                }
                continue;
            }
        };
        if let Some(want) = d.owner.filter(|&w| w != owner) {
            let why = format!(
                "{} belongs to uid {owner}, not to uid {want} it is named for",
                d.path.display()
            );
            out.problems.push((d.path, why));
            continue;
        }
        read_dir(&d.path, owner, &mut out.found);
    }
    out
}

fn read_dir(dir: &Path, owner: u32, found: &mut Vec<Found>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.take(MAX_ENTRIES_PER_DIR).flatten() {
        if found.len() >= MAX_FOUND {
            return;
        }
        let name = entry.file_name();
        let Some(pid) = dirs::sock_pid(&name) else {
            continue;
        };
        // A process with both the Python companion and the interposer reports one
        // model per pid: the framework's view is the richer one, so it wins.
        let is_driver = name.to_str().is_some_and(|n| n.ends_with(".driver.sock"));
        if is_driver && dir.join(format!("{pid}.sock")).exists() {
            continue;
        }
        let path = entry.path();
        let id = file_id(&path);
        found.push(Found {
            path,
            pid,
            dir_owner: owner,
            id,
        });
    }
}

pub(crate) fn file_id(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_full_directory_is_read_only_up_to_its_share() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        for i in 1..=(MAX_ENTRIES_PER_DIR + 500) {
            std::fs::write(tmp.path().join(format!("{i}.sock")), b"").expect("file");
        }
        let s = run(
            Some(vec![tmp.path().to_path_buf()]),
            &Places::default(),
            dirs::own_uid(),
            &mut LiveUids::default(),
        );
        assert!(s.found.len() <= MAX_ENTRIES_PER_DIR, "{}", s.found.len());
        assert!(s.found.len() > MAX_ENTRIES_PER_DIR / 2);
    }

    #[test]
    fn another_users_place_made_by_someone_else_is_refused() {
        let places = Places {
            tmp: tempfile::tempdir().expect("tmp").keep(),
            ..Places::default()
        };
        let own = dirs::own_uid();
        if own != 0 {
            return; // only root looks at other users' places
        }
        // Some process of uid 0 exists (this one): its default place under `tmp`,
        // made with the wrong owner.
        let d = places.tmp.join("gpumon-0");
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::chown(&d, Some(4242), Some(4242)).expect("chown");
        let s = run(None, &places, own, &mut LiveUids::default());
        assert!(
            s.problems
                .iter()
                .any(|(p, e)| p == &d && e.contains("uid 4242")),
            "{:?}",
            s.problems
        );
        let _ = std::fs::remove_dir_all(&places.tmp);
    }
}
