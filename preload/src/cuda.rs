//! FFI types for the driver entry points the interposer wraps.
//!
//! Handles and structs come from cudarc's generated driver bindings. The status
//! code is deliberately *not* cudarc's `CUresult` enum: a driver newer than the
//! bindings may return a code the enum lacks, and holding such a value in a Rust
//! enum is undefined behaviour. The wrappers must hand the caller the driver's
//! result bit for bit, so they carry it as a plain `u32`.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub use cudarc::driver::sys::{
    CUdevice, CUdeviceptr, CUmemAllocationProp, CUmemGenericAllocationHandle, CUmemoryPool,
    CUstream, CUuuid,
};

/// `CUresult` as the driver returns it.
pub type CuStatus = c_uint;

pub const CUDA_SUCCESS: CuStatus = 0;
/// Returned by an exported wrapper only when the real function cannot be found
/// at all (the program reached our symbol without any libcuda loaded).
pub const CUDA_ERROR_NOT_INITIALIZED: CuStatus = 3;

/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
/// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`.
pub const MEMPOOL_ATTR_RESERVED_MEM_CURRENT: c_int =
    cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT as c_int;
/// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`.
pub const MEMPOOL_ATTR_RESERVED_MEM_HIGH: c_int =
    cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH as c_int;

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
/// location-type enum (a newer header may use a value cudarc's enum lacks).
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
