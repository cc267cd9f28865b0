//! Size histogram of live allocations: bucket `k = floor(log2(size))`, the same
//! bucketing the protocol uses for free blocks, updated with atomics only.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets `0..=MAX_BUCKET`: every `floor(log2(size))` of a `u64` size.
pub const BUCKETS: usize = crate::protocol::MAX_BUCKET as usize + 1;

/// The bucket of a size in bytes; sizes 0 and 1 share bucket 0.
pub fn bucket(size: u64) -> usize {
    if size == 0 {
        0
    } else {
        63 - size.leading_zeros() as usize
    }
}

pub struct Log2Hist {
    count: [AtomicU64; BUCKETS],
    bytes: [AtomicU64; BUCKETS],
}

impl Default for Log2Hist {
    fn default() -> Self {
        Self::new()
    }
}

impl Log2Hist {
    pub const fn new() -> Self {
        Self {
            count: [const { AtomicU64::new(0) }; BUCKETS],
            bytes: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    pub fn add(&self, size: u64) {
        let k = bucket(size);
        self.count[k].fetch_add(1, Ordering::Relaxed);
        self.bytes[k].fetch_add(size, Ordering::Relaxed);
    }

    /// Removes one allocation of `size`. Saturates instead of wrapping so a
    /// racing reader never sees a huge bogus count.
    pub fn sub(&self, size: u64) {
        let k = bucket(size);
        saturating_sub(&self.count[k], 1);
        saturating_sub(&self.bytes[k], size);
    }

    /// Non-empty buckets as `[k, count, bytes]`, in ascending `k`.
    pub fn snapshot(&self) -> Vec<[u64; 3]> {
        (0..BUCKETS)
            .filter_map(|k| {
                let n = self.count[k].load(Ordering::Relaxed);
                (n > 0).then(|| [k as u64, n, self.bytes[k].load(Ordering::Relaxed)])
            })
            .collect()
    }

    pub fn clear(&self) {
        for k in 0..BUCKETS {
            self.count[k].store(0, Ordering::Relaxed);
            self.bytes[k].store(0, Ordering::Relaxed);
        }
    }
}

pub fn saturating_sub(a: &AtomicU64, by: u64) {
    let mut cur = a.load(Ordering::Relaxed);
    loop {
        let next = cur.saturating_sub(by);
        match a.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(seen) => cur = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_floor_log2() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 1);
        assert_eq!(bucket(4096), 12);
        assert_eq!(bucket(4097), 12);
        assert_eq!(bucket(8191), 12);
        assert_eq!(bucket(2 << 20), 21);
        assert_eq!(bucket(u64::MAX), 63);
    }

    #[test]
    fn add_and_sub_track_live_allocations() {
        let h = Log2Hist::new();
        h.add(4096);
        h.add(5000);
        h.add(1 << 21);
        assert_eq!(h.snapshot(), vec![[12, 2, 9096], [21, 1, 1 << 21]]);
        h.sub(4096);
        assert_eq!(h.snapshot(), vec![[12, 1, 5000], [21, 1, 1 << 21]]);
        h.sub(5000);
        h.sub(1 << 21);
        assert!(h.snapshot().is_empty());
    }

    #[test]
    fn sub_never_wraps() {
        let h = Log2Hist::new();
        h.sub(100);
        assert!(h.snapshot().is_empty());
        h.add(100);
        h.clear();
        assert!(h.snapshot().is_empty());
    }
}
