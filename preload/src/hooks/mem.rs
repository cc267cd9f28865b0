//! Wrappers of the driver's memory functions.
//!
//! Each wrapper calls the real function with the caller's arguments, returns its
//! status untouched, and only on success records what happened. Frees are the
//! exception in ordering: the entry leaves the table *before* the real free, so
//! another thread that receives the same address right after it cannot have its
//! new entry removed by a late bookkeeping step; a failed free puts it back.

// Each wrapper's safety contract is exactly that of the driver function it wraps.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_uint, c_void};

use crate::cuda::*;
use crate::hooks::per_slot;
use crate::lifecycle::{enabled, guard, guard_or};
use crate::record;
use crate::slots::{Entry, SLOTS, real_fn};
use crate::table::Kind;

macro_rules! real_or_fail {
    ($ty:ty, $entry:expr, $slot:expr) => {
        // SAFETY: every slot of `$entry` holds a function of type `$ty`.
        match unsafe { real_fn::<$ty>($entry, $slot) } {
            Some(f) => f,
            None => return CUDA_ERROR_NOT_INITIALIZED,
        }
    };
}

/// Reads a device pointer the driver just wrote.
///
/// # Safety
/// `p` must be null or valid for reads.
unsafe fn out<T: Copy + Default>(p: *const T) -> Option<T> {
    // SAFETY: forwarded from the caller.
    (!p.is_null()).then(|| unsafe { p.read() })
}

pub unsafe extern "C" fn mem_alloc<const S: usize>(
    dptr: *mut CUdeviceptr,
    size: usize,
) -> CuStatus {
    let real = real_or_fail!(MemAllocFn, Entry::MemAlloc, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, size) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote `*dptr`.
        if let Some(addr) = unsafe { out(dptr) } {
            guard(|| record::device_alloc(Kind::Alloc, addr, size as u64, 0, None));
        }
    }
    rc
}

pub unsafe extern "C" fn mem_alloc_pitch<const S: usize>(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    elem: c_uint,
) -> CuStatus {
    let real = real_or_fail!(MemAllocPitchFn, Entry::MemAllocPitch, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, pitch, width, height, elem) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote both out-values.
        if let (Some(addr), Some(p)) = unsafe { (out(dptr), out(pitch)) } {
            let size = (p as u64).saturating_mul(height as u64);
            guard(|| record::device_alloc(Kind::Pitch, addr, size, 0, None));
        }
    }
    rc
}

pub unsafe extern "C" fn mem_alloc_managed<const S: usize>(
    dptr: *mut CUdeviceptr,
    size: usize,
    flags: c_uint,
) -> CuStatus {
    let real = real_or_fail!(MemAllocManagedFn, Entry::MemAllocManaged, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, size, flags) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote `*dptr`.
        if let Some(addr) = unsafe { out(dptr) } {
            guard(|| record::device_alloc(Kind::Managed, addr, size as u64, 0, None));
        }
    }
    rc
}

pub unsafe extern "C" fn mem_free<const S: usize>(dptr: CUdeviceptr) -> CuStatus {
    let real = real_or_fail!(MemFreeFn, Entry::MemFree, S);
    let taken = guard_or(None, || record::take(dptr));
    // SAFETY: the caller's argument, passed on unchanged.
    let rc = unsafe { real(dptr) };
    if let Some(t) = taken {
        guard(|| record::settle_free(dptr, t, 0, rc == CUDA_SUCCESS));
    }
    rc
}

pub unsafe extern "C" fn mem_alloc_async<const S: usize>(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CuStatus {
    let real = real_or_fail!(MemAllocAsyncFn, Entry::MemAllocAsync, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, size, stream) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote `*dptr`.
        if let Some(addr) = unsafe { out(dptr) } {
            let st = stream as u64;
            guard(|| record::device_alloc(Kind::Async, addr, size as u64, st, None));
        }
    }
    rc
}

pub unsafe extern "C" fn mem_alloc_from_pool_async<const S: usize>(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CuStatus {
    let real = real_or_fail!(MemAllocFromPoolAsyncFn, Entry::MemAllocFromPoolAsync, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, size, pool, stream) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote `*dptr`.
        if let Some(addr) = unsafe { out(dptr) } {
            let (st, pl) = (stream as u64, pool as u64);
            guard(|| {
                record::note_pool(pl);
                record::device_alloc(Kind::Pool, addr, size as u64, st, None)
            });
        }
    }
    rc
}

pub unsafe extern "C" fn mem_free_async<const S: usize>(
    dptr: CUdeviceptr,
    stream: CUstream,
) -> CuStatus {
    let real = real_or_fail!(MemFreeAsyncFn, Entry::MemFreeAsync, S);
    let taken = guard_or(None, || record::take(dptr));
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(dptr, stream) };
    if let Some(t) = taken {
        let st = stream as u64;
        guard(|| record::settle_free(dptr, t, st, rc == CUDA_SUCCESS));
    }
    rc
}

pub unsafe extern "C" fn mem_create<const S: usize>(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: u64,
) -> CuStatus {
    let real = real_or_fail!(MemCreateFn, Entry::MemCreate, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(handle, size, prop, flags) };
    if rc == CUDA_SUCCESS && enabled() {
        // SAFETY: on success the driver wrote `*handle` and read `*prop`.
        if let (Some(h), dev) = unsafe { (out(handle), prop_device(prop)) } {
            guard(|| record::vmm_create(h, size as u64, dev));
        }
    }
    rc
}

pub unsafe extern "C" fn mem_release<const S: usize>(
    handle: CUmemGenericAllocationHandle,
) -> CuStatus {
    let real = real_or_fail!(MemReleaseFn, Entry::MemRelease, S);
    // SAFETY: the caller's argument, passed on unchanged.
    let rc = unsafe { real(handle) };
    if rc == CUDA_SUCCESS && enabled() {
        guard(|| record::vmm_release(handle));
    }
    rc
}

pub unsafe extern "C" fn mem_map<const S: usize>(
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: u64,
) -> CuStatus {
    let real = real_or_fail!(MemMapFn, Entry::MemMap, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(ptr, size, offset, handle, flags) };
    if rc == CUDA_SUCCESS && enabled() {
        guard(|| record::vmm_map(ptr, size as u64, handle));
    }
    rc
}

pub unsafe extern "C" fn mem_unmap<const S: usize>(ptr: CUdeviceptr, size: usize) -> CuStatus {
    let real = real_or_fail!(MemUnmapFn, Entry::MemUnmap, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(ptr, size) };
    if rc == CUDA_SUCCESS && enabled() {
        guard(|| record::vmm_unmap(ptr, size as u64));
    }
    rc
}

pub unsafe extern "C" fn mem_host_alloc<const S: usize>(
    pp: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> CuStatus {
    let real = real_or_fail!(MemHostAllocFn, Entry::MemHostAlloc, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(pp, size, flags) };
    if rc == CUDA_SUCCESS && enabled() && !pp.is_null() {
        // SAFETY: on success the driver wrote `*pp`.
        let addr = unsafe { pp.read() } as u64;
        guard(|| record::host_alloc(Kind::HostAlloc, addr, size as u64));
    }
    rc
}

pub unsafe extern "C" fn mem_alloc_host<const S: usize>(
    pp: *mut *mut c_void,
    size: usize,
) -> CuStatus {
    let real = real_or_fail!(MemAllocHostFn, Entry::MemAllocHost, S);
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(pp, size) };
    if rc == CUDA_SUCCESS && enabled() && !pp.is_null() {
        // SAFETY: on success the driver wrote `*pp`.
        let addr = unsafe { pp.read() } as u64;
        guard(|| record::host_alloc(Kind::Host, addr, size as u64));
    }
    rc
}

pub unsafe extern "C" fn mem_free_host<const S: usize>(p: *mut c_void) -> CuStatus {
    let real = real_or_fail!(MemFreeHostFn, Entry::MemFreeHost, S);
    let addr = p as u64;
    let taken = guard_or(None, || record::take(addr));
    // SAFETY: the caller's argument, passed on unchanged.
    let rc = unsafe { real(p) };
    if let Some(t) = taken {
        guard(|| record::settle_free(addr, t, 0, rc == CUDA_SUCCESS));
    }
    rc
}

/// The address of the wrapper instance for a memory entry and slot.
pub fn wrapper(entry: Entry, s: usize) -> usize {
    let s = s % SLOTS;
    match entry {
        Entry::MemAlloc => {
            let t: [MemAllocFn; SLOTS] = per_slot!(mem_alloc);
            t[s] as usize
        }
        Entry::MemAllocPitch => {
            let t: [MemAllocPitchFn; SLOTS] = per_slot!(mem_alloc_pitch);
            t[s] as usize
        }
        Entry::MemAllocManaged => {
            let t: [MemAllocManagedFn; SLOTS] = per_slot!(mem_alloc_managed);
            t[s] as usize
        }
        Entry::MemFree => {
            let t: [MemFreeFn; SLOTS] = per_slot!(mem_free);
            t[s] as usize
        }
        Entry::MemAllocAsync => {
            let t: [MemAllocAsyncFn; SLOTS] = per_slot!(mem_alloc_async);
            t[s] as usize
        }
        Entry::MemAllocFromPoolAsync => {
            let t: [MemAllocFromPoolAsyncFn; SLOTS] = per_slot!(mem_alloc_from_pool_async);
            t[s] as usize
        }
        Entry::MemFreeAsync => {
            let t: [MemFreeAsyncFn; SLOTS] = per_slot!(mem_free_async);
            t[s] as usize
        }
        Entry::MemCreate => {
            let t: [MemCreateFn; SLOTS] = per_slot!(mem_create);
            t[s] as usize
        }
        Entry::MemRelease => {
            let t: [MemReleaseFn; SLOTS] = per_slot!(mem_release);
            t[s] as usize
        }
        Entry::MemMap => {
            let t: [MemMapFn; SLOTS] = per_slot!(mem_map);
            t[s] as usize
        }
        Entry::MemUnmap => {
            let t: [MemUnmapFn; SLOTS] = per_slot!(mem_unmap);
            t[s] as usize
        }
        Entry::MemHostAlloc => {
            let t: [MemHostAllocFn; SLOTS] = per_slot!(mem_host_alloc);
            t[s] as usize
        }
        Entry::MemAllocHost => {
            let t: [MemAllocHostFn; SLOTS] = per_slot!(mem_alloc_host);
            t[s] as usize
        }
        Entry::MemFreeHost => {
            let t: [MemFreeHostFn; SLOTS] = per_slot!(mem_free_host);
            t[s] as usize
        }
        Entry::GetProcAddress | Entry::GetProcAddressV2 => 0,
    }
}

/// The exported symbols: what a program linked against libcuda calls directly.
/// Left out of this crate's own unit-test binary, where they would shadow
/// nothing useful and only confuse the test process.
#[cfg(not(test))]
mod exports {
    use super::*;

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc::<0>(dptr, size) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocPitch_v2(
        dptr: *mut CUdeviceptr,
        pitch: *mut usize,
        width: usize,
        height: usize,
        elem: c_uint,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_pitch::<0>(dptr, pitch, width, height, elem) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocManaged(
        dptr: *mut CUdeviceptr,
        size: usize,
        flags: c_uint,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_managed::<0>(dptr, size, flags) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_free::<0>(dptr) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocAsync(
        dptr: *mut CUdeviceptr,
        size: usize,
        stream: CUstream,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_async::<0>(dptr, size, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
        dptr: *mut CUdeviceptr,
        size: usize,
        stream: CUstream,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_async::<1>(dptr, size, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocFromPoolAsync(
        dptr: *mut CUdeviceptr,
        size: usize,
        pool: CUmemoryPool,
        stream: CUstream,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_from_pool_async::<0>(dptr, size, pool, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocFromPoolAsync_ptsz(
        dptr: *mut CUdeviceptr,
        size: usize,
        pool: CUmemoryPool,
        stream: CUstream,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_from_pool_async::<1>(dptr, size, pool, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_free_async::<0>(dptr, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_free_async::<1>(dptr, stream) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemCreate(
        handle: *mut CUmemGenericAllocationHandle,
        size: usize,
        prop: *const CUmemAllocationProp,
        flags: u64,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_create::<0>(handle, size, prop, flags) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_release::<0>(handle) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemMap(
        ptr: CUdeviceptr,
        size: usize,
        offset: usize,
        handle: CUmemGenericAllocationHandle,
        flags: u64,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_map::<0>(ptr, size, offset, handle, flags) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_unmap::<0>(ptr, size) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemHostAlloc(
        pp: *mut *mut c_void,
        size: usize,
        flags: c_uint,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_host_alloc::<0>(pp, size, flags) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_alloc_host::<0>(pp, size) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { mem_free_host::<0>(p) }
    }
}
