//! Real driver pointers and the wrapper handed out for each.
//!
//! Every covered entry point has `SLOTS` wrapper instances (the same code,
//! monomorphised per slot) and a slot table of real pointers. Slot 0 (and 1 for
//! `_ptsz` variants) belongs to the exported symbol and is resolved from the next
//! library on first use; the other slots are claimed by whatever distinct real
//! pointer `dlsym` or `cuGetProcAddress` returns (a per-thread-stream variant, a
//! different ABI version, a second libcuda). Keying by the real pointer keeps
//! one wrapper per real function however many name/version/flag combinations
//! resolve to it.

use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cuda::{GPA_V2_SINCE, V2_SINCE};
use crate::lifecycle;
use crate::real;

pub const SLOTS: usize = 8;
/// Slots owned by exported symbols.
pub const FIXED: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Entry {
    MemAlloc,
    MemAllocPitch,
    MemAllocManaged,
    MemFree,
    MemAllocAsync,
    MemAllocFromPoolAsync,
    MemFreeAsync,
    MemCreate,
    MemRelease,
    MemMap,
    MemUnmap,
    MemHostAlloc,
    MemAllocHost,
    MemFreeHost,
    GetProcAddress,
    GetProcAddressV2,
}

pub const ENTRIES: usize = 16;

impl Entry {
    /// The exported symbol that owns a fixed slot.
    pub fn export(self, slot: usize) -> Option<&'static CStr> {
        use Entry::*;
        let name = match (self, slot) {
            (MemAlloc, 0) => c"cuMemAlloc_v2",
            (MemAllocPitch, 0) => c"cuMemAllocPitch_v2",
            (MemAllocManaged, 0) => c"cuMemAllocManaged",
            (MemFree, 0) => c"cuMemFree_v2",
            (MemAllocAsync, 0) => c"cuMemAllocAsync",
            (MemAllocAsync, 1) => c"cuMemAllocAsync_ptsz",
            (MemAllocFromPoolAsync, 0) => c"cuMemAllocFromPoolAsync",
            (MemAllocFromPoolAsync, 1) => c"cuMemAllocFromPoolAsync_ptsz",
            (MemFreeAsync, 0) => c"cuMemFreeAsync",
            (MemFreeAsync, 1) => c"cuMemFreeAsync_ptsz",
            (MemCreate, 0) => c"cuMemCreate",
            (MemRelease, 0) => c"cuMemRelease",
            (MemMap, 0) => c"cuMemMap",
            (MemUnmap, 0) => c"cuMemUnmap",
            (MemHostAlloc, 0) => c"cuMemHostAlloc",
            (MemAllocHost, 0) => c"cuMemAllocHost_v2",
            (MemFreeHost, 0) => c"cuMemFreeHost",
            (GetProcAddress, 0) => c"cuGetProcAddress",
            (GetProcAddressV2, 0) => c"cuGetProcAddress_v2",
            _ => return None,
        };
        Some(name)
    }

    /// The entry for a symbol name as `dlsym` sees it (the exported spelling).
    pub fn from_symbol(name: &[u8]) -> Option<Entry> {
        use Entry::*;
        Some(match name {
            b"cuMemAlloc_v2" => MemAlloc,
            b"cuMemAllocPitch_v2" => MemAllocPitch,
            b"cuMemAllocManaged" => MemAllocManaged,
            b"cuMemFree_v2" => MemFree,
            b"cuMemAllocAsync" | b"cuMemAllocAsync_ptsz" => MemAllocAsync,
            b"cuMemAllocFromPoolAsync" | b"cuMemAllocFromPoolAsync_ptsz" => MemAllocFromPoolAsync,
            b"cuMemFreeAsync" | b"cuMemFreeAsync_ptsz" => MemFreeAsync,
            b"cuMemCreate" => MemCreate,
            b"cuMemRelease" => MemRelease,
            b"cuMemMap" => MemMap,
            b"cuMemUnmap" => MemUnmap,
            b"cuMemHostAlloc" => MemHostAlloc,
            b"cuMemAllocHost_v2" => MemAllocHost,
            b"cuMemFreeHost" => MemFreeHost,
            b"cuGetProcAddress" => GetProcAddress,
            b"cuGetProcAddress_v2" => GetProcAddressV2,
            _ => return None,
        })
    }

    /// The entry for a `cuGetProcAddress` request: a base name plus the ABI
    /// version asked for. Below 3020 `cuMemAlloc` & co. are the 32-bit ABI,
    /// which is left unwrapped; from 12000 `cuGetProcAddress` is the `_v2` ABI.
    pub fn from_proc(name: &[u8], version: c_int) -> Option<Entry> {
        use Entry::*;
        let v2 = version >= V2_SINCE;
        match name {
            b"cuMemAlloc" => v2.then_some(MemAlloc),
            b"cuMemAllocPitch" => v2.then_some(MemAllocPitch),
            b"cuMemFree" => v2.then_some(MemFree),
            b"cuMemAllocHost" => v2.then_some(MemAllocHost),
            b"cuGetProcAddress" => Some(if version >= GPA_V2_SINCE {
                GetProcAddressV2
            } else {
                GetProcAddress
            }),
            other => Entry::from_symbol(other),
        }
    }
}

static REAL: [[AtomicUsize; SLOTS]; ENTRIES] =
    [const { [const { AtomicUsize::new(0) }; SLOTS] }; ENTRIES];

/// The real function behind a slot (0 when unknown).
pub fn real(entry: Entry, slot: usize) -> usize {
    let cell = &REAL[entry as usize][slot % SLOTS];
    let a = cell.load(Ordering::Acquire);
    if a != 0 || slot >= FIXED {
        return a;
    }
    let Some(name) = entry.export(slot) else {
        return 0;
    };
    let found = real::driver_sym(name);
    if found == 0 || is_ours(found) {
        return 0;
    }
    match cell.compare_exchange(0, found, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => found,
        Err(cur) => cur,
    }
}

/// The real function behind a slot as type `F`.
///
/// # Safety
/// `F` must be the C signature of `entry`.
pub unsafe fn real_fn<F: Copy>(entry: Entry, slot: usize) -> Option<F> {
    let a = real(entry, slot);
    // SAFETY: per the caller, `a` is the address of a function of type `F`.
    (a != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&a) })
}

/// The slot whose wrapper to hand out for a real pointer: an existing slot's if one
/// holds it, else a free dynamic slot's (`hooks::wrapper` gives its address). `None`
/// for our own functions and, when all slots are taken, unknown pointers: those are
/// handed out as they are (unobserved, never broken).
pub fn slot_for(entry: Entry, real_ptr: usize) -> Option<usize> {
    if real_ptr == 0 || is_ours(real_ptr) {
        return None;
    }
    for s in 0..SLOTS {
        if real(entry, s) == real_ptr {
            return Some(s);
        }
    }
    for (s, cell) in REAL[entry as usize].iter().enumerate().skip(FIXED) {
        match cell.compare_exchange(0, real_ptr, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(s),
            Err(cur) if cur == real_ptr => return Some(s),
            Err(_) => {}
        }
    }
    lifecycle::notice("more driver variants than wrapper slots; some calls go unobserved");
    None
}

/// The base address of this library, to recognise pointers into it.
static OUR_BASE: AtomicUsize = AtomicUsize::new(0);

fn object_base(addr: usize) -> usize {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `dladdr` only reads loader data; `info` is a valid out-pointer.
    let ok = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) };
    if ok == 0 { 0 } else { info.dli_fbase as usize }
}

/// Whether `addr` lies in this library (one of our wrappers or exports).
pub fn is_ours(addr: usize) -> bool {
    let mut base = OUR_BASE.load(Ordering::Relaxed);
    if base == 0 {
        base = object_base(is_ours as *const () as usize);
        OUR_BASE.store(base, Ordering::Relaxed);
    }
    base != 0 && object_base(addr) == base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_entries() {
        assert_eq!(Entry::from_symbol(b"cuMemAlloc_v2"), Some(Entry::MemAlloc));
        assert_eq!(Entry::from_symbol(b"cuMemAlloc"), None);
        assert_eq!(
            Entry::from_symbol(b"cuMemFreeAsync_ptsz"),
            Some(Entry::MemFreeAsync)
        );
        assert_eq!(
            Entry::from_proc(b"cuMemAlloc", 13000),
            Some(Entry::MemAlloc)
        );
        assert_eq!(Entry::from_proc(b"cuMemAlloc", 2000), None);
        assert_eq!(
            Entry::from_proc(b"cuGetProcAddress", 11030),
            Some(Entry::GetProcAddress)
        );
        assert_eq!(
            Entry::from_proc(b"cuGetProcAddress", 13000),
            Some(Entry::GetProcAddressV2)
        );
        assert_eq!(
            Entry::from_proc(b"cuMemCreate", 10020),
            Some(Entry::MemCreate)
        );
        assert_eq!(Entry::from_proc(b"cuLaunchKernel", 13000), None);
    }

    #[test]
    fn every_export_name_maps_back_to_its_entry() {
        for e in 0..ENTRIES {
            // SAFETY: `Entry` is `repr(usize)` with ENTRIES contiguous variants.
            let entry: Entry = unsafe { std::mem::transmute::<usize, Entry>(e) };
            assert!(entry.export(0).is_some(), "{entry:?}");
            for s in 0..FIXED {
                if let Some(name) = entry.export(s) {
                    assert_eq!(Entry::from_symbol(name.to_bytes()), Some(entry));
                }
            }
        }
    }

    #[test]
    fn pointers_into_this_object_are_ours() {
        assert!(is_ours(slot_for as *const () as usize));
        assert!(!is_ours(libc::getpid as *const () as usize));
        // Our own function is never wrapped again.
        assert_eq!(
            slot_for(Entry::MemFree, slot_for as *const () as usize),
            None
        );
    }

    #[test]
    fn distinct_real_pointers_get_distinct_slots_and_repeat_stably() {
        // Any foreign address stands in for a driver function; nothing calls it.
        let a = libc::getpid as *const () as usize;
        let b = libc::getppid as *const () as usize;
        let sa = slot_for(Entry::MemHostAlloc, a).expect("a free slot");
        let sb = slot_for(Entry::MemHostAlloc, b).expect("a free slot");
        assert_ne!(sa, sb);
        assert!(sa >= FIXED && sb >= FIXED, "dynamic slots");
        assert_eq!(slot_for(Entry::MemHostAlloc, a), Some(sa));
        assert_eq!(real(Entry::MemHostAlloc, FIXED), a);
    }
}
