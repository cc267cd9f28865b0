//! FFI types for the driver entry points the interposer wraps.
//!
//! Declared here, from `cuda.h`, rather than taken from a bindings crate: the interposer
//! needs a handful of typedefs and no driver code, and every crate it depends on must also
//! be one gpumon's own build depends on, so that a build from `cargo vendor` output (which
//! fetches only gpumon's dependency graph) can build the embedded interposer too
//! (build.rs; gpumon's `tests/it/packaging.rs` checks the rule).
//!
//! Nothing here is a Rust enum. A driver newer than any header may return a status or
//! write a field value that an enum lacks, and holding such a value in a Rust enum is
//! undefined behaviour. The wrappers must hand the caller the driver's result bit for bit,
//! so they carry it as a plain `u32`, and enum-typed fields are plain integers.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

/// `CUdevice`: an ordinal handle.
pub type CUdevice = c_int;
/// `CUdeviceptr` (the `_v2` ABI: 64 bits on every platform the driver supports).
pub type CUdeviceptr = c_ulonglong;
/// `CUmemGenericAllocationHandle`.
pub type CUmemGenericAllocationHandle = c_ulonglong;

/// The driver's opaque stream object; only pointers to it are passed.
#[repr(C)]
pub struct StreamObject {
    _opaque: [u8; 0],
}
pub type CUstream = *mut StreamObject;

/// The driver's opaque memory pool object; only pointers to it are passed.
#[repr(C)]
pub struct MemPoolObject {
    _opaque: [u8; 0],
}
pub type CUmemoryPool = *mut MemPoolObject;

/// `CUuuid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUuuid {
    pub bytes: [c_char; 16],
}

/// `CUmemLocation`: `{ CUmemLocationType type; int id; }`. CUDA 13.2 made `id` a union
/// member of the same size and place.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemLocation {
    pub type_: c_uint,
    pub id: c_int,
}

/// `CUmemAllocationProp`, only ever read through the caller's pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemAllocationProp {
    pub type_: c_uint,
    pub requested_handle_types: c_uint,
    pub location: CUmemLocation,
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags`: compression type, RDMA capability, usage, reserved.
    pub alloc_flags: [u8; 8],
}

/// `CUresult` as the driver returns it.
pub type CuStatus = c_uint;

pub const CUDA_SUCCESS: CuStatus = 0;
/// Returned by an exported wrapper only when the real function cannot be found
/// at all (the program reached our symbol without any libcuda loaded).
pub const CUDA_ERROR_NOT_INITIALIZED: CuStatus = 3;

/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
/// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`.
pub const MEMPOOL_ATTR_RESERVED_MEM_CURRENT: c_int = 5;
/// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`.
pub const MEMPOOL_ATTR_RESERVED_MEM_HIGH: c_int = 6;

/// The ABI version from which `cuMemAlloc` & co. resolve to their 64-bit `_v2` forms.
pub const V2_SINCE: c_int = 3020;
/// The ABI version from which `cuGetProcAddress` resolves to `cuGetProcAddress_v2`.
pub const GPA_V2_SINCE: c_int = 12000;

pub type MemAllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CuStatus;
pub type MemAllocPitchFn =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, c_uint) -> CuStatus;
pub type MemAllocManagedFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CuStatus;
pub type MemFreeFn = unsafe extern "C" fn(CUdeviceptr) -> CuStatus;
pub type MemAllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CuStatus;
pub type MemAllocFromPoolAsyncFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CuStatus;
pub type MemFreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CuStatus;
pub type MemCreateFn = unsafe extern "C" fn(
    *mut CUmemGenericAllocationHandle,
    usize,
    *const CUmemAllocationProp,
    u64,
) -> CuStatus;
pub type MemReleaseFn = unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CuStatus;
pub type MemMapFn =
    unsafe extern "C" fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, u64) -> CuStatus;
pub type MemUnmapFn = unsafe extern "C" fn(CUdeviceptr, usize) -> CuStatus;
pub type MemHostAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuStatus;
pub type MemAllocHostFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> CuStatus;
pub type MemFreeHostFn = unsafe extern "C" fn(*mut c_void) -> CuStatus;
/// `cuGetProcAddress` (CUDA 11.3 ABI). The status pointer of `_v2` is passed
/// through untouched, so its enum type never has to be read.
pub type GetProcAddressFn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CuStatus;
pub type GetProcAddressV2Fn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuStatus;

// Functions the bookkeeping and the reporter call themselves (never wrapped).
pub type CtxGetDeviceFn = unsafe extern "C" fn(*mut CUdevice) -> CuStatus;
pub type DeviceGetCountFn = unsafe extern "C" fn(*mut c_int) -> CuStatus;
pub type DeviceGetFn = unsafe extern "C" fn(*mut CUdevice, c_int) -> CuStatus;
pub type DeviceGetNameFn = unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CuStatus;
pub type DeviceGetUuidFn = unsafe extern "C" fn(*mut CUuuid, CUdevice) -> CuStatus;
pub type DeviceTotalMemFn = unsafe extern "C" fn(*mut usize, CUdevice) -> CuStatus;
pub type DeviceGetPciBusIdFn = unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CuStatus;
pub type DriverGetVersionFn = unsafe extern "C" fn(*mut c_int) -> CuStatus;
pub type DeviceGetMemPoolFn = unsafe extern "C" fn(*mut CUmemoryPool, CUdevice) -> CuStatus;
pub type MemPoolGetAttributeFn = unsafe extern "C" fn(CUmemoryPool, c_int, *mut c_void) -> CuStatus;

/// Reads the device a `cuMemCreate` property targets, without materialising the
/// location type as an enum (a newer header may use a value no enum here has).
///
/// # Safety
/// `prop` must be null or point to a readable `CUmemAllocationProp`.
pub unsafe fn prop_device(prop: *const CUmemAllocationProp) -> Option<i32> {
    if prop.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees a readable struct; both fields are 4-byte
    // integers at fixed offsets in every driver ABI since CUDA 10.2.
    let (kind, id) = unsafe {
        let loc = std::ptr::addr_of!((*prop).location);
        let kind = std::ptr::read_unaligned(loc.cast::<c_uint>());
        let id = std::ptr::read_unaligned(loc.cast::<c_int>().add(1));
        (kind, id)
    };
    (kind == MEM_LOCATION_TYPE_DEVICE).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The layouts `cuda.h` gives on 64-bit Linux (x86-64 and aarch64 alike).
    #[test]
    fn layouts_are_the_headers() {
        assert_eq!(size_of::<CUuuid>(), 16);
        assert_eq!(size_of::<CUmemLocation>(), 8);
        assert_eq!(size_of::<CUmemAllocationProp>(), 32);
        assert_eq!(offset_of!(CUmemAllocationProp, location), 8);
        assert_eq!(offset_of!(CUmemAllocationProp, win32_handle_meta_data), 16);
        assert_eq!(offset_of!(CUmemAllocationProp, alloc_flags), 24);
        assert_eq!(size_of::<CUdeviceptr>(), 8);
        assert_eq!(size_of::<CUstream>(), size_of::<*mut c_void>());
    }

    #[test]
    fn prop_device_reads_the_location_of_a_device_allocation() {
        let mut prop = CUmemAllocationProp {
            type_: 1,
            requested_handle_types: 0,
            location: CUmemLocation {
                type_: MEM_LOCATION_TYPE_DEVICE,
                id: 3,
            },
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: [0; 8],
        };
        // SAFETY: a live local struct, and null.
        unsafe {
            assert_eq!(prop_device(&prop), Some(3));
            prop.location.type_ = 2;
            assert_eq!(prop_device(&prop), None);
            assert_eq!(prop_device(std::ptr::null()), None);
        }
    }
}
