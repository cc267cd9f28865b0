//! Per-device counters: live and peak bytes, the live-size histogram, the
//! largest allocation, and the driver pools' reserve. Atomics only, so the
//! allocation path never waits here and the reporter reads without locking.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::hist::{Log2Hist, saturating_sub};

/// Device ordinals at or above this are folded into the last slot.
pub const MAX_DEVICES: usize = 64;
/// Explicit pools (`cuMemAllocFromPoolAsync`) remembered per device.
pub const MAX_POOLS: usize = 8;

pub struct DevStats {
    pub seen: AtomicBool,
    /// Device bytes the program holds (all device kinds).
    pub live: AtomicU64,
    /// The part of `live` that sits in stream-ordered pools.
    pub live_pooled: AtomicU64,
    pub live_count: AtomicU64,
    pub peak_live: AtomicU64,
    /// Bytes the driver's pools hold (sampled from the driver; 0 when no pool).
    pub pool_reserved: AtomicU64,
    pub pool_reserved_high: AtomicU64,
    pub peak_reserved: AtomicU64,
    pub largest: AtomicU64,
    pub used_pools: AtomicBool,
    pub pools: [AtomicU64; MAX_POOLS],
    pub hist: Log2Hist,
}

impl Default for DevStats {
    fn default() -> Self {
        Self::new()
    }
}

impl DevStats {
    pub const fn new() -> Self {
        Self {
            seen: AtomicBool::new(false),
            live: AtomicU64::new(0),
            live_pooled: AtomicU64::new(0),
            live_count: AtomicU64::new(0),
            peak_live: AtomicU64::new(0),
            pool_reserved: AtomicU64::new(0),
            pool_reserved_high: AtomicU64::new(0),
            peak_reserved: AtomicU64::new(0),
            largest: AtomicU64::new(0),
            used_pools: AtomicBool::new(false),
            pools: [const { AtomicU64::new(0) }; MAX_POOLS],
            hist: Log2Hist::new(),
        }
    }

    pub fn add(&self, size: u64, pooled: bool) {
        if !self.seen.load(Ordering::Relaxed) {
            self.seen.store(true, Ordering::Relaxed);
        }
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.live_count.fetch_add(1, Ordering::Relaxed);
        if pooled {
            self.live_pooled.fetch_add(size, Ordering::Relaxed);
            if !self.used_pools.load(Ordering::Relaxed) {
                self.used_pools.store(true, Ordering::Relaxed);
            }
        }
        raise(&self.peak_live, live);
        raise(&self.largest, size);
        self.hist.add(size);
        raise(&self.peak_reserved, self.reserved());
    }

    pub fn sub(&self, size: u64, pooled: bool) {
        saturating_sub(&self.live, size);
        saturating_sub(&self.live_count, 1);
        if pooled {
            saturating_sub(&self.live_pooled, size);
        }
        self.hist.sub(size);
    }

    /// Bytes the device holds for the program: what is not pooled, plus the
    /// pools' reserve (never less than what lives in them, since the reserve is
    /// only sampled).
    pub fn reserved(&self) -> u64 {
        let live = self.live.load(Ordering::Relaxed);
        let pooled = self.live_pooled.load(Ordering::Relaxed);
        let pool = self.pool_reserved.load(Ordering::Relaxed).max(pooled);
        live.saturating_sub(pooled).saturating_add(pool)
    }

    /// Stores a fresh reading of the pools' reserve and folds it into the peak.
    pub fn set_pool_reserved(&self, current: u64, high: u64) {
        self.pool_reserved.store(current, Ordering::Relaxed);
        self.pool_reserved_high.fetch_max(high, Ordering::Relaxed);
        self.peak_reserved
            .fetch_max(self.reserved(), Ordering::Relaxed);
    }

    /// Remembers an explicit pool; false when the table is full (not reported then).
    pub fn note_pool(&self, pool: u64) -> bool {
        if pool == 0 {
            return false;
        }
        if !self.used_pools.load(Ordering::Relaxed) {
            self.used_pools.store(true, Ordering::Relaxed);
        }
        for slot in &self.pools {
            let cur = slot.load(Ordering::Relaxed);
            if cur == pool {
                return true;
            }
            if cur == 0
                && slot
                    .compare_exchange(0, pool, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
            if slot.load(Ordering::Relaxed) == pool {
                return true;
            }
        }
        false
    }

    pub fn pools(&self) -> Vec<u64> {
        self.pools
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .filter(|&p| p != 0)
            .collect()
    }

    pub fn reset(&self) {
        for a in [
            &self.live,
            &self.live_pooled,
            &self.live_count,
            &self.peak_live,
            &self.pool_reserved,
            &self.pool_reserved_high,
            &self.peak_reserved,
            &self.largest,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        for p in &self.pools {
            p.store(0, Ordering::Relaxed);
        }
        self.seen.store(false, Ordering::Relaxed);
        self.used_pools.store(false, Ordering::Relaxed);
        self.hist.clear();
    }
}

/// `fetch_max` without the locked instruction when the value is no new maximum,
/// which is the common case on the allocation path.
fn raise(a: &AtomicU64, v: u64) {
    if v > a.load(Ordering::Relaxed) {
        a.fetch_max(v, Ordering::Relaxed);
    }
}

/// Pinned host memory, reported apart from device memory.
pub struct HostStats {
    pub live: AtomicU64,
    pub count: AtomicU64,
    pub peak: AtomicU64,
}

impl HostStats {
    pub const fn new() -> Self {
        Self {
            live: AtomicU64::new(0),
            count: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    pub fn add(&self, size: u64) {
        let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
        self.count.fetch_add(1, Ordering::Relaxed);
        raise(&self.peak, live);
    }

    pub fn sub(&self, size: u64) {
        saturating_sub(&self.live, size);
        saturating_sub(&self.count, 1);
    }

    pub fn reset(&self) {
        self.live.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        self.peak.store(0, Ordering::Relaxed);
    }
}

impl Default for HostStats {
    fn default() -> Self {
        Self::new()
    }
}

pub static DEVICES: [DevStats; MAX_DEVICES] = [const { DevStats::new() }; MAX_DEVICES];
pub static HOST: HostStats = HostStats::new();

/// The slot for a driver device ordinal (negative or huge ordinals fold into the last).
pub fn slot(dev: i32) -> usize {
    usize::try_from(dev).map_or(MAX_DEVICES - 1, |d| d.min(MAX_DEVICES - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_peak_and_histogram() {
        let d = DevStats::new();
        d.add(1 << 20, false);
        d.add(3 << 20, false);
        d.sub(1 << 20, false);
        d.add(512, false);
        assert_eq!(d.live.load(Ordering::Relaxed), (3 << 20) + 512);
        assert_eq!(d.peak_live.load(Ordering::Relaxed), 4 << 20);
        assert_eq!(d.peak_reserved.load(Ordering::Relaxed), 4 << 20);
        assert_eq!(d.largest.load(Ordering::Relaxed), 3 << 20);
        assert_eq!(d.live_count.load(Ordering::Relaxed), 2);
        assert_eq!(d.hist.snapshot(), vec![[9, 1, 512], [21, 1, 3 << 20]]);
        assert_eq!(d.reserved(), (3 << 20) + 512);
    }

    #[test]
    fn pool_reserve_counts_once() {
        let d = DevStats::new();
        d.add(100, false);
        d.add(1_000, true);
        // Before the first pool reading the pool holds at least its live bytes.
        assert_eq!(d.reserved(), 1_100);
        d.set_pool_reserved(32 << 20, 64 << 20);
        assert_eq!(d.reserved(), 100 + (32 << 20));
        assert_eq!(d.peak_reserved.load(Ordering::Relaxed), 100 + (32 << 20));
        assert_eq!(d.pool_reserved_high.load(Ordering::Relaxed), 64 << 20);
        d.sub(1_000, true);
        assert_eq!(d.live_pooled.load(Ordering::Relaxed), 0);
        assert_eq!(d.reserved(), 100 + (32 << 20));
    }

    #[test]
    fn pools_are_remembered_once_and_bounded() {
        let d = DevStats::new();
        assert!(!d.note_pool(0));
        assert!(d.note_pool(7));
        assert!(d.note_pool(7));
        for p in 100..100 + MAX_POOLS as u64 - 1 {
            assert!(d.note_pool(p));
        }
        assert!(!d.note_pool(999));
        assert_eq!(d.pools().len(), MAX_POOLS);
        d.reset();
        assert!(d.pools().is_empty());
        assert!(!d.seen.load(Ordering::Relaxed));
    }

    #[test]
    fn host_stats_and_slots() {
        let h = HostStats::new();
        h.add(10);
        h.add(20);
        h.sub(10);
        assert_eq!(h.live.load(Ordering::Relaxed), 20);
        assert_eq!(h.peak.load(Ordering::Relaxed), 30);
        assert_eq!(slot(-1), MAX_DEVICES - 1);
        assert_eq!(slot(3), 3);
        assert_eq!(slot(1_000), MAX_DEVICES - 1);
    }
}
