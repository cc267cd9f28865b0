//! The sockets the reporter owns, as plain descriptor numbers in atomics.
//!
//! The reporter is taken out of its lock while it does socket I/O (so `fork`
//! and exit never wait on a peer), which means a forked child may find the
//! lock's slot empty while the parent's reporter — and its descriptors — were
//! in use on the parent's reporter thread. The child still holds copies of
//! those descriptors; unless it closes them, a monitor would never see the
//! connection end. This table lets the child close exactly those, without
//! allocating and without the reporter value.

use std::sync::atomic::{AtomicI32, Ordering};

/// The listener, 16 monitors and 8 connections awaiting their hello, with room.
const SLOTS: usize = 32;

static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

/// Remember `fd`; false when the table is full (the caller refuses the connection).
pub fn add(fd: i32) -> bool {
    FDS.iter().any(|s| {
        s.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })
}

pub fn remove(fd: i32) {
    for s in &FDS {
        if s.compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// In a forked child only: close every descriptor the parent's reporter had.
pub fn close_all_in_child() {
    for s in &FDS {
        let fd = s.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            // SAFETY: the child's copy of a descriptor the parent's reporter owned;
            // nothing else in the child uses it (no other thread exists yet).
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_remove_and_full() {
        // Numbers far from any real descriptor of the test process.
        let base = 1_000_000;
        let mut added = Vec::new();
        while add(base + added.len() as i32) {
            added.push(base + added.len() as i32);
            assert!(added.len() <= SLOTS);
        }
        assert!(!add(base + 999));
        for fd in added {
            remove(fd);
        }
        assert!(add(base));
        remove(base);
    }
}
