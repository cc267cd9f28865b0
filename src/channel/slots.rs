//! What the scanner remembers about socket paths, bounded: a path is
//! remembered while the last scan saw it or a connection to it is open, and forgotten
//! once it is gone, so a user who makes sockets under ever new names costs gpumon at
//! most one scan's worth of entries (`scan::MAX_FOUND`) plus the open connections.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::scan::FileId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Connected,
    RetryAt(Instant),
    RefusedUntilChanged(FileId),
}

#[derive(Default)]
pub(crate) struct Slots {
    map: HashMap<PathBuf, Slot>,
}

impl Slots {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn set(&mut self, path: PathBuf, slot: Slot) {
        self.map.insert(path, slot);
    }

    /// Whether to connect to `path` now; `id` is what the scan saw there.
    pub(crate) fn due(&self, path: &Path, id: Option<FileId>, now: Instant) -> bool {
        match self.map.get(path) {
            None => true,
            Some(Slot::Connected) => false,
            Some(Slot::RetryAt(at)) => now >= *at,
            Some(Slot::RefusedUntilChanged(was)) => id.is_some_and(|id| id != *was),
        }
    }

    /// The earliest retry still to come: the scanner wakes for it (no directory changes
    /// when a companion that hung up may be tried again).
    pub(crate) fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.map
            .values()
            .filter_map(|s| match s {
                Slot::RetryAt(at) if *at > now => Some(*at),
                _ => None,
            })
            .min()
    }

    /// Forget every path the last scan did not see, unless a connection to it is open.
    pub(crate) fn keep_seen(&mut self, seen: &HashSet<&Path>) {
        self.map
            .retain(|p, s| *s == Slot::Connected || seen.contains(p.as_path()));
        if self.map.capacity() > 4 * self.map.len().max(64) {
            self.map.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churning_names_stay_bounded_and_open_connections_are_kept() {
        let mut s = Slots::default();
        let now = Instant::now();
        let later = now + std::time::Duration::from_secs(60);
        s.set("/d/1.sock".into(), Slot::Connected);
        // 100 scans, each seeing 50 names never seen before (a name flood).
        for round in 0..100u32 {
            let names: Vec<PathBuf> = (0..50)
                .map(|i| PathBuf::from(format!("/d/{}.sock", 1000 + round * 50 + i)))
                .collect();
            for n in &names {
                assert!(s.due(n, Some((1, 1, 1)), now));
                s.set(n.clone(), Slot::RetryAt(later));
            }
            let seen: HashSet<&Path> = names.iter().map(PathBuf::as_path).collect();
            s.keep_seen(&seen);
            assert!(s.len() <= 51, "round {round}: {}", s.len());
        }
        assert!(
            !s.due(Path::new("/d/1.sock"), None, now),
            "open connection kept"
        );
        s.set("/d/2.sock".into(), Slot::RefusedUntilChanged((1, 2, 3)));
        assert!(!s.due(Path::new("/d/2.sock"), Some((1, 2, 3)), now));
        assert!(
            s.due(Path::new("/d/2.sock"), Some((1, 2, 4)), now),
            "replaced"
        );
        assert_eq!(s.next_retry(now), Some(later));
        assert_eq!(s.next_retry(later), None, "only retries still to come");
        s.keep_seen(&HashSet::new());
        assert_eq!(s.len(), 1, "only the open connection is left");
    }
}
