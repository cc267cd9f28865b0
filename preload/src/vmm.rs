//! Virtual-memory-management bookkeeping (`cuMemCreate` / `cuMemMap` /
//! `cuMemUnmap` / `cuMemRelease`, which PyTorch's expandable segments use).
//!
//! Physical memory exists from `cuMemCreate` until the handle is released *and*
//! no mapping of it remains (the driver keeps released-but-mapped memory alive),
//! so both facts are tracked per handle.

use std::collections::HashMap;

use crate::table::AddrHash;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub size: u64,
    pub dev: u16,
    pub released: bool,
    pub maps: u32,
}

/// Physical memory that just went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    pub handle: u64,
    pub size: u64,
    pub dev: u16,
}

#[derive(Default)]
pub struct Vmm {
    handles: HashMap<u64, Handle, AddrHash>,
    /// Mapped virtual address → (handle, mapped size).
    maps: HashMap<u64, (u64, u64), AddrHash>,
}

impl Vmm {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            handles: HashMap::with_capacity_and_hasher(n, AddrHash),
            maps: HashMap::with_capacity_and_hasher(n, AddrHash),
        }
    }

    /// Returns the handle it replaced (a release the hooks never saw).
    pub fn create(&mut self, handle: u64, size: u64, dev: u16) -> Option<Handle> {
        self.handles.insert(
            handle,
            Handle {
                size,
                dev,
                released: false,
                maps: 0,
            },
        )
    }

    pub fn release(&mut self, handle: u64) -> Option<Freed> {
        let h = self.handles.get_mut(&handle)?;
        h.released = true;
        self.collect(handle)
    }

    pub fn map(&mut self, va: u64, size: u64, handle: u64) {
        if let Some(h) = self.handles.get_mut(&handle) {
            h.maps = h.maps.saturating_add(1);
            self.maps.insert(va, (handle, size));
        }
    }

    /// Unmaps the mapping that starts at `va`; returns the mapped size (to step
    /// through a range covering several mappings) and any memory this freed.
    pub fn unmap_one(&mut self, va: u64) -> Option<(u64, Option<Freed>)> {
        let (handle, size) = self.maps.remove(&va)?;
        let freed = match self.handles.get_mut(&handle) {
            Some(h) => {
                h.maps = h.maps.saturating_sub(1);
                self.collect(handle)
            }
            None => None,
        };
        Some((size, freed))
    }

    fn collect(&mut self, handle: u64) -> Option<Freed> {
        let h = *self.handles.get(&handle)?;
        if h.released && h.maps == 0 {
            self.handles.remove(&handle);
            return Some(Freed {
                handle,
                size: h.size,
                dev: h.dev,
            });
        }
        None
    }

    pub fn handles(&self) -> impl Iterator<Item = (u64, Handle)> + '_ {
        self.handles.iter().map(|(&k, &h)| (k, h))
    }

    pub fn clear(&mut self) {
        self.handles.clear();
        self.maps.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_after_unmap_frees_at_release() {
        let mut v = Vmm::default();
        v.create(1, 20 << 20, 0);
        v.map(0x1000_0000, 20 << 20, 1);
        assert_eq!(v.unmap_one(0x1000_0000), Some((20 << 20, None)));
        assert_eq!(
            v.release(1),
            Some(Freed {
                handle: 1,
                size: 20 << 20,
                dev: 0
            })
        );
        assert_eq!(v.handles().count(), 0);
    }

    #[test]
    fn release_while_mapped_frees_at_last_unmap() {
        let mut v = Vmm::default();
        v.create(7, 2 << 20, 1);
        v.map(0xa000, 1 << 20, 7);
        v.map(0xa000 + (1 << 20), 1 << 20, 7);
        assert_eq!(v.release(7), None);
        assert_eq!(v.unmap_one(0xa000), Some((1 << 20, None)));
        let last = v.unmap_one(0xa000 + (1 << 20));
        assert_eq!(
            last,
            Some((
                1 << 20,
                Some(Freed {
                    handle: 7,
                    size: 2 << 20,
                    dev: 1
                })
            ))
        );
    }

    #[test]
    fn unknown_handles_and_addresses_are_ignored() {
        let mut v = Vmm::default();
        assert_eq!(v.release(9), None);
        v.map(0x10, 4, 9);
        assert_eq!(v.unmap_one(0x10), None);
        assert!(v.create(3, 10, 0).is_none());
        assert!(v.create(3, 10, 0).is_some());
        v.clear();
        assert_eq!(v.handles().count(), 0);
    }
}
