//! The live allocation table: every device (and pinned host) allocation the
//! program holds, keyed by address.
//!
//! 64 shards, each a spin-locked hash map created with room for 256 entries,
//! so the allocation path takes one short, almost always uncontended lock and
//! allocates nothing until a shard outgrows its initial capacity. Unified
//! addressing makes device and pinned-host addresses unique process-wide, so one
//! key space serves all devices.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::spin::SpinLock;

const SHARDS: usize = 64;
/// 16k entries before any shard grows: framework caches hold hundreds to a few
/// thousand segments; a larger start only spreads the hot path over more cache.
const SHARD_CAPACITY: usize = 256;

/// What kind of call made an allocation; the name is the protocol's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Alloc = 0,
    Pitch = 1,
    Managed = 2,
    Async = 3,
    Pool = 4,
    Vmm = 5,
    HostAlloc = 6,
    Host = 7,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Alloc => "alloc",
            Kind::Pitch => "pitch",
            Kind::Managed => "managed",
            Kind::Async => "async",
            Kind::Pool => "pool",
            Kind::Vmm => "vmm",
            Kind::HostAlloc => "host_alloc",
            Kind::Host => "host",
        }
    }

    pub fn from_u8(v: u8) -> Kind {
        match v {
            0 => Kind::Alloc,
            1 => Kind::Pitch,
            2 => Kind::Managed,
            3 => Kind::Async,
            4 => Kind::Pool,
            5 => Kind::Vmm,
            6 => Kind::HostAlloc,
            _ => Kind::Host,
        }
    }

    /// Stream-ordered allocations live inside a driver memory pool.
    pub fn pooled(self) -> bool {
        matches!(self, Kind::Async | Kind::Pool)
    }

    pub fn host(self) -> bool {
        matches!(self, Kind::HostAlloc | Kind::Host)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    pub size: u64,
    pub t_us: u64,
    pub stream: u64,
    pub dev: u16,
    pub kind: Kind,
}

/// splitmix64's finaliser: device addresses are heavily aligned, so their low
/// bits alone would pile every entry into a few buckets.
pub fn mix(addr: u64) -> u64 {
    let mut z = addr.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Default, Clone, Copy)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = mix(v);
    }
}

#[derive(Default, Clone, Copy)]
pub struct AddrHash;

impl BuildHasher for AddrHash {
    type Hasher = AddrHasher;
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(0)
    }
}

type Shard = HashMap<u64, Live, AddrHash>;

pub struct LiveTable {
    shards: Box<[SpinLock<Shard>]>,
}

/// The shard comes from middle bits of the mix: the map itself uses the low bits
/// for its bucket index and the top bits for its control bytes.
fn shard_of(addr: u64) -> usize {
    ((mix(addr) >> 32) as usize) % SHARDS
}

impl Default for LiveTable {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveTable {
    pub fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| SpinLock::new(HashMap::with_capacity_and_hasher(SHARD_CAPACITY, AddrHash)))
            .collect();
        Self { shards }
    }

    /// Inserts a live allocation; returns the entry it replaced, which means the
    /// matching free was never seen (a path the hooks did not cover).
    pub fn insert(&self, addr: u64, live: Live) -> Option<Live> {
        self.shards[shard_of(addr)].lock().insert(addr, live)
    }

    pub fn remove(&self, addr: u64) -> Option<Live> {
        self.shards[shard_of(addr)].lock().remove(&addr)
    }

    pub fn get(&self, addr: u64) -> Option<Live> {
        self.shards[shard_of(addr)].lock().get(&addr).copied()
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of every entry, one shard locked at a time.
    pub fn snapshot(&self) -> Vec<(u64, Live)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let g = s.lock();
            out.extend(g.iter().map(|(&a, &l)| (a, l)));
        }
        out
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.lock().clear();
        }
    }

    /// For `fork`: see [`crate::fork`].
    pub fn lock_all(&self) {
        for s in self.shards.iter() {
            s.raw_lock();
        }
    }

    /// # Safety
    /// Only after [`Self::lock_all`] (in the parent or the child of a fork).
    pub unsafe fn unlock_all(&self) {
        for s in self.shards.iter() {
            // SAFETY: forwarded from the caller.
            unsafe { s.raw_unlock() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn live(size: u64, dev: u16, kind: Kind) -> Live {
        Live {
            size,
            t_us: 1,
            stream: 0,
            dev,
            kind,
        }
    }

    #[test]
    fn insert_remove_and_replace() {
        let t = LiveTable::new();
        assert!(
            t.insert(0x7f00_0000_0000, live(4096, 0, Kind::Alloc))
                .is_none()
        );
        assert!(
            t.insert(0x7f00_0020_0000, live(8192, 1, Kind::Async))
                .is_none()
        );
        assert_eq!(t.len(), 2);
        let old = t.insert(0x7f00_0000_0000, live(100, 0, Kind::Pitch));
        assert_eq!(old.map(|l| l.size), Some(4096));
        assert_eq!(
            t.remove(0x7f00_0000_0000).map(|l| l.kind),
            Some(Kind::Pitch)
        );
        assert!(t.remove(0x7f00_0000_0000).is_none());
        assert_eq!(t.get(0x7f00_0020_0000).map(|l| l.dev), Some(1));
        assert_eq!(t.len(), 1);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn aligned_addresses_spread_over_shards() {
        let shards: HashSet<usize> = (0..4096u64).map(|i| shard_of(i << 21)).collect();
        assert_eq!(shards.len(), SHARDS);
    }

    #[test]
    fn many_threads_keep_the_table_exact() {
        let t = std::sync::Arc::new(LiveTable::new());
        let threads: Vec<_> = (0..4u64)
            .map(|n| {
                let t = std::sync::Arc::clone(&t);
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let addr = (n << 40) | (i << 9);
                        t.insert(addr, live(512, 0, Kind::Alloc));
                        if i % 2 == 0 {
                            t.remove(addr);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            assert!(th.join().is_ok());
        }
        assert_eq!(t.len(), 4 * 10_000);
        assert_eq!(t.snapshot().len(), 4 * 10_000);
    }

    #[test]
    fn kind_round_trips_through_u8() {
        for k in [
            Kind::Alloc,
            Kind::Pitch,
            Kind::Managed,
            Kind::Async,
            Kind::Pool,
            Kind::Vmm,
            Kind::HostAlloc,
            Kind::Host,
        ] {
            assert_eq!(Kind::from_u8(k as u8), k);
        }
        assert!(Kind::Pool.pooled() && !Kind::Vmm.pooled());
        assert!(Kind::Host.host() && !Kind::Managed.host());
    }
}
