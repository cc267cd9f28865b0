//! What the reporter asks the driver itself: device identities for `hello`,
//! and the reserve of the stream-ordered pools. Only device-level queries that
//! need no current context, from the reporter thread, never on the hot path.

use std::ffi::{c_char, c_int, c_void};

use serde_json::{Value, json};

use crate::cuda::*;
use crate::devices::{DEVICES, MAX_DEVICES};
use crate::real::DriverFn;

static DEVICE_GET_COUNT: DriverFn = DriverFn::new(c"cuDeviceGetCount");
static DEVICE_GET: DriverFn = DriverFn::new(c"cuDeviceGet");
static DEVICE_GET_NAME: DriverFn = DriverFn::new(c"cuDeviceGetName");
static DEVICE_GET_UUID: DriverFn = DriverFn::new(c"cuDeviceGetUuid_v2");
static DEVICE_GET_UUID_V1: DriverFn = DriverFn::new(c"cuDeviceGetUuid");
static DEVICE_TOTAL_MEM: DriverFn = DriverFn::new(c"cuDeviceTotalMem_v2");
static DEVICE_PCI_BUS_ID: DriverFn = DriverFn::new(c"cuDeviceGetPCIBusId");
static DRIVER_GET_VERSION: DriverFn = DriverFn::new(c"cuDriverGetVersion");
static DEVICE_GET_MEM_POOL: DriverFn = DriverFn::new(c"cuDeviceGetMemPool");
static MEM_POOL_GET_ATTRIBUTE: DriverFn = DriverFn::new(c"cuMemPoolGetAttribute");

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML and nvidia-smi print it.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

fn c_text(buf: &[c_char]) -> Option<String> {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// The driver version as `major.minor`, e.g. `13.0`.
pub fn driver_version() -> Option<String> {
    // SAFETY: the signature of `cuDriverGetVersion`.
    let f = unsafe { DRIVER_GET_VERSION.get::<DriverGetVersionFn>() }?;
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer.
    (unsafe { f(&mut v) } == CUDA_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// `hello.devices`: whatever of name, uuid, bus id and total the driver answers.
pub fn devices() -> Vec<Value> {
    // SAFETY: each type is the named function's signature.
    let (count, get) = unsafe {
        (
            DEVICE_GET_COUNT.get::<DeviceGetCountFn>(),
            DEVICE_GET.get::<DeviceGetFn>(),
        )
    };
    let (Some(count), Some(get)) = (count, get) else {
        return Vec::new();
    };
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    if unsafe { count(&mut n) } != CUDA_SUCCESS {
        return Vec::new();
    }
    (0..n.clamp(0, MAX_DEVICES as c_int))
        .filter_map(|i| {
            let mut dev: CUdevice = 0;
            // SAFETY: valid out-pointer; `i` is below the device count.
            (unsafe { get(&mut dev, i) } == CUDA_SUCCESS).then(|| describe(i, dev))
        })
        .collect()
}

fn describe(ordinal: c_int, dev: CUdevice) -> Value {
    let mut out = json!({ "dev": ordinal });
    // SAFETY: `DeviceGetNameFn` is the C signature of `cuDeviceGetName(char*, int, CUdevice)`.
    if let Some(f) = unsafe { DEVICE_GET_NAME.get::<DeviceGetNameFn>() } {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL included, into `buf`, a local
        // of exactly that length; `dev` is a handle `cuDeviceGet` returned.
        if unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) } == CUDA_SUCCESS {
            out["name"] = json!(c_text(&buf));
        }
    }
    // SAFETY: `cuDeviceGetUuid_v2` and `cuDeviceGetUuid` both have the C signature
    // `(CUuuid*, CUdevice)`, which is `DeviceGetUuidFn`.
    let uuid_fn = unsafe { DEVICE_GET_UUID.get::<DeviceGetUuidFn>() }
        // SAFETY: as above, the same signature.
        .or_else(|| unsafe { DEVICE_GET_UUID_V1.get::<DeviceGetUuidFn>() });
    if let Some(f) = uuid_fn {
        let mut u = CUuuid { bytes: [0; 16] };
        // SAFETY: the driver writes one `CUuuid` (16 bytes) through the pointer, and `u` is
        // a local `CUuuid`; `dev` is a handle `cuDeviceGet` returned.
        if unsafe { f(&mut u, dev) } == CUDA_SUCCESS {
            let b: [u8; 16] = u.bytes.map(|c| c as u8);
            out["uuid"] = json!(format_uuid(&b));
        }
    }
    // SAFETY: `DeviceGetPciBusIdFn` is the C signature of
    // `cuDeviceGetPCIBusId(char*, int, CUdevice)`.
    if let Some(f) = unsafe { DEVICE_PCI_BUS_ID.get::<DeviceGetPciBusIdFn>() } {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the driver writes at most `len` bytes, NUL included, into `buf`, a local
        // of exactly that length; `dev` is a handle `cuDeviceGet` returned.
        if unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) } == CUDA_SUCCESS {
            out["pci_bus_id"] = json!(c_text(&buf));
        }
    }
    // SAFETY: `DeviceTotalMemFn` is the C signature of `cuDeviceTotalMem_v2(size_t*, CUdevice)`.
    if let Some(f) = unsafe { DEVICE_TOTAL_MEM.get::<DeviceTotalMemFn>() } {
        let mut total = 0usize;
        // SAFETY: the driver writes one `size_t` into `total`, a local `usize`; `dev` is a
        // handle `cuDeviceGet` returned.
        if unsafe { f(&mut total, dev) } == CUDA_SUCCESS {
            out["total"] = json!(total);
        }
    }
    out
}

fn pool_attr(get: MemPoolGetAttributeFn, pool: CUmemoryPool, attr: c_int) -> Option<u64> {
    let mut v: u64 = 0;
    // SAFETY: both reserve attributes are `cuuint64_t`; `v` is a valid out-pointer.
    let rc = unsafe { get(pool, attr, (&mut v as *mut u64).cast::<c_void>()) };
    (rc == CUDA_SUCCESS).then_some(v)
}

/// Refreshes `pool_reserved` of every device that used stream-ordered memory:
/// the device's current pool (what `cuMemAllocAsync` draws from) plus every
/// explicit pool seen in `cuMemAllocFromPoolAsync`.
pub fn refresh_pools() {
    // SAFETY: the signatures of the named functions.
    let (Some(get_pool), Some(get_attr)) = (unsafe {
        (
            DEVICE_GET_MEM_POOL.get::<DeviceGetMemPoolFn>(),
            MEM_POOL_GET_ATTRIBUTE.get::<MemPoolGetAttributeFn>(),
        )
    }) else {
        return;
    };
    for (i, d) in DEVICES.iter().enumerate() {
        if !d.used_pools.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        let mut pools = d.pools();
        let mut current: CUmemoryPool = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `i` is a device ordinal we saw memory on.
        if unsafe { get_pool(&mut current, i as CUdevice) } == CUDA_SUCCESS && !current.is_null() {
            pools.push(current as u64);
        }
        pools.sort_unstable();
        pools.dedup();
        let (mut cur, mut high) = (0u64, 0u64);
        for p in pools {
            let pool = p as CUmemoryPool;
            cur += pool_attr(get_attr, pool, MEMPOOL_ATTR_RESERVED_MEM_CURRENT).unwrap_or(0);
            high += pool_attr(get_attr, pool, MEMPOOL_ATTR_RESERVED_MEM_HIGH).unwrap_or(0);
        }
        d.set_pool_reserved(cur, high);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_formatted_like_nvml() {
        let b: [u8; 16] = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(format_uuid(&b), "GPU-12345678-9abc-def0-0123-456789abcdef");
    }

    #[test]
    fn c_text_stops_at_nul() {
        let mut buf = [0 as c_char; 8];
        for (i, c) in b"H200".iter().enumerate() {
            buf[i] = *c as c_char;
        }
        assert_eq!(c_text(&buf).as_deref(), Some("H200"));
        assert_eq!(c_text(&[0; 4]), None);
    }

    #[test]
    fn without_a_driver_there_is_nothing_to_say() {
        assert!(devices().is_empty());
        assert!(driver_version().is_none());
        refresh_pools();
    }
}
