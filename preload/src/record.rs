//! What a successful driver call changes in the bookkeeping. Called by the
//! wrappers only after the real call returned `CUDA_SUCCESS`, inside `guard`.

use std::sync::atomic::Ordering;

use crate::clock::now_us;
use crate::cuda::{CUDA_SUCCESS, CtxGetDeviceFn};
use crate::devices::{self, DEVICES, HOST};
use crate::lifecycle::{MONITORS, State, state};
use crate::real::DriverFn;
use crate::reporter;
use crate::ring::Event;
use crate::table::{Kind, Live};
use crate::vmm::Freed;

static CTX_GET_DEVICE: DriverFn = DriverFn::new(c"cuCtxGetDevice");

/// The device of the calling thread's current context: where `cuMemAlloc` and
/// friends put their memory. Unknown (no context, no driver) folds into device 0,
/// which cannot happen right after a successful allocation.
fn current_device() -> i32 {
    // SAFETY: `cuCtxGetDevice` has exactly this signature.
    let Some(f) = (unsafe { CTX_GET_DEVICE.get::<CtxGetDeviceFn>() }) else {
        return 0;
    };
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer.
    let rc = unsafe { f(&mut dev) };
    if rc == CUDA_SUCCESS { dev } else { 0 }
}

fn push(s: &State, ev: Event) {
    if MONITORS.load(Ordering::Relaxed) > 0 {
        s.ring.push(ev);
    }
}

fn event(t_us: u64, op: u8, addr: u64, size: u64, stream: u64, dev: u16, kind: Kind) -> Event {
    Event {
        t_us,
        addr,
        size,
        stream,
        dev,
        op,
        kind: kind as u8,
    }
}

/// Queues an event stamped now; the clock is read only when someone listens.
fn push_now(s: &State, op: u8, addr: u64, size: u64, stream: u64, dev: u16, kind: Kind) {
    if MONITORS.load(Ordering::Relaxed) > 0 {
        s.ring
            .push(event(now_us(), op, addr, size, stream, dev, kind));
    }
}

/// Undoes the counters of an entry whose free was never seen.
fn forget(old: Live) {
    if old.kind.host() {
        HOST.sub(old.size);
    } else {
        DEVICES[usize::from(old.dev)].sub(old.size, old.kind.pooled());
    }
}

/// A device allocation; `dev` is `None` when the call implies the current device.
pub fn device_alloc(kind: Kind, addr: u64, size: u64, stream: u64, dev: Option<i32>) {
    let Some(s) = state() else { return };
    let slot = devices::slot(dev.unwrap_or_else(current_device));
    let t_us = now_us();
    let dev16 = slot as u16;
    if let Some(old) = s.table.insert(
        addr,
        Live {
            size,
            t_us,
            stream,
            dev: dev16,
            kind,
        },
    ) {
        forget(old);
    }
    DEVICES[slot].add(size, kind.pooled());
    push(s, event(t_us, b'+', addr, size, stream, dev16, kind));
    reporter::ensure_started();
}

/// Takes an allocation out of the table ahead of its free (see `hooks::mem`).
pub fn take(addr: u64) -> Option<Live> {
    let s = state()?;
    let old = s.table.remove(addr)?;
    forget(old);
    Some(old)
}

/// Completes a free begun with [`take`]: reports it, or puts the entry back
/// when the driver refused the free.
pub fn settle_free(addr: u64, old: Live, stream: u64, ok: bool) {
    let Some(s) = state() else { return };
    if ok {
        if !old.kind.host() {
            push_now(s, b'-', addr, old.size, stream, old.dev, old.kind);
        }
        return;
    }
    if let Some(newer) = s.table.insert(addr, old) {
        forget(newer);
    }
    if old.kind.host() {
        HOST.add(old.size);
    } else {
        DEVICES[usize::from(old.dev)].add(old.size, old.kind.pooled());
    }
}

/// An explicit pool used on a device, so the reporter can read its reserve.
pub fn note_pool(pool: u64) {
    if state().is_some() {
        DEVICES[devices::slot(current_device())].note_pool(pool);
    }
}

/// Pinned host memory: counted apart, never in a device's bytes.
pub fn host_alloc(kind: Kind, addr: u64, size: u64) {
    let Some(s) = state() else { return };
    let live = Live {
        size,
        t_us: now_us(),
        stream: 0,
        dev: 0,
        kind,
    };
    if let Some(old) = s.table.insert(addr, live) {
        forget(old);
    }
    HOST.add(size);
    reporter::ensure_started();
}

/// `cuMemCreate`: physical memory, reported under its handle.
pub fn vmm_create(handle: u64, size: u64, dev: Option<i32>) {
    let Some(s) = state() else { return };
    let slot = devices::slot(dev.unwrap_or_else(current_device));
    let replaced = s.vmm.lock().create(handle, size, slot as u16);
    if let Some(old) = replaced {
        DEVICES[usize::from(old.dev)].sub(old.size, false);
    }
    DEVICES[slot].add(size, false);
    push_now(s, b'+', handle, size, 0, slot as u16, Kind::Vmm);
    reporter::ensure_started();
}

fn vmm_freed(s: &State, f: Freed) {
    DEVICES[usize::from(f.dev)].sub(f.size, false);
    push_now(s, b'-', f.handle, f.size, 0, f.dev, Kind::Vmm);
}

pub fn vmm_release(handle: u64) {
    let Some(s) = state() else { return };
    let freed = s.vmm.lock().release(handle);
    if let Some(f) = freed {
        vmm_freed(s, f);
    }
}

pub fn vmm_map(va: u64, size: u64, handle: u64) {
    if let Some(s) = state() {
        s.vmm.lock().map(va, size, handle);
    }
}

/// `cuMemUnmap` may cover several mappings laid end to end; each is undone.
pub fn vmm_unmap(va: u64, size: u64) {
    let Some(s) = state() else { return };
    let end = va.saturating_add(size);
    let mut cur = va;
    while cur < end {
        let step = s.vmm.lock().unmap_one(cur);
        let Some((mapped, freed)) = step else { break };
        if let Some(f) = freed {
            vmm_freed(s, f);
        }
        if mapped == 0 {
            break;
        }
        cur = cur.saturating_add(mapped);
    }
}
