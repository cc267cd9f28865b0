//! Lazy initialisation, the pass-through switch, panic containment, the bookkeeping's part
//! of a `fork` (`fork` says in which order the parts' handlers run).
//!
//! Nothing runs at load time: the first wrapped call builds the state. If that
//! fails, or `GPUMON_PRELOAD_DISABLE` is set, or bookkeeping ever panics, the
//! wrappers keep passing calls through and only the bookkeeping stops.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::devices::{DEVICES, HOST};
use crate::fork::{self, Handlers};
use crate::ring::Ring;
use crate::spin::SpinLock;
use crate::table::LiveTable;
use crate::vmm::Vmm;

/// Events buffered between two reporter ticks while a monitor is connected.
const RING_CAPACITY: usize = 1 << 16;

pub struct State {
    pub table: LiveTable,
    pub ring: Ring,
    pub vmm: SpinLock<Vmm>,
}

static STATE: OnceLock<Option<State>> = OnceLock::new();
static DISABLED: AtomicBool = AtomicBool::new(false);
/// Monitors past the handshake; events are queued only while there is one.
pub static MONITORS: AtomicUsize = AtomicUsize::new(0);

/// The bookkeeping, or `None` when the interposer passes calls through.
pub fn state() -> Option<&'static State> {
    if DISABLED.load(Ordering::Relaxed) {
        return None;
    }
    STATE.get_or_init(init).as_ref()
}

fn init() -> Option<State> {
    if std::env::var_os("GPUMON_PRELOAD_DISABLE").is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    let built = catch_unwind(|| State {
        table: LiveTable::new(),
        ring: Ring::new(RING_CAPACITY),
        vmm: SpinLock::new(Vmm::with_capacity(1_024)),
    });
    let Ok(state) = built else {
        notice("could not set up its tables; passing CUDA calls through unobserved");
        return None;
    };
    // Registered before anything is recorded, so before any table lock is taken.
    let registered = fork::on_fork(Handlers {
        before: before_fork,
        parent: after_fork_parent,
        child: after_fork_child,
    });
    if !registered {
        notice("pthread_atfork failed; passing CUDA calls through unobserved");
        return None;
    }
    Some(state)
}

/// Turns the bookkeeping off for good (the wrappers keep passing calls through).
pub fn disable(why: &str) {
    if !DISABLED.swap(true, Ordering::Relaxed) {
        notice(why);
    }
}

pub fn enabled() -> bool {
    !DISABLED.load(Ordering::Relaxed)
}

/// Runs bookkeeping so that a panic never unwinds into C and never repeats.
pub fn guard<F: FnOnce()>(f: F) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        disable("internal error; passing CUDA calls through unobserved from now on");
    }
}

/// Same as [`guard`] for code that computes a value, with a fallback.
pub fn guard_or<T, F: FnOnce() -> T>(fallback: T, f: F) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            disable("internal error; passing CUDA calls through unobserved from now on");
            fallback
        }
    }
}

static NOTICES: AtomicU32 = AtomicU32::new(0);

/// One line on stderr, at most a few per process, written with `write(2)` so it
/// needs neither std's stderr lock nor an allocation.
pub fn notice(msg: &str) {
    if NOTICES.fetch_add(1, Ordering::Relaxed) >= 3 {
        return;
    }
    let parts: [&[u8]; 3] = [b"gpumon-preload: ", msg.as_bytes(), b"\n"];
    let iov = parts.map(|p| libc::iovec {
        iov_base: p.as_ptr() as *mut libc::c_void,
        iov_len: p.len(),
    });
    // One writev, so a parent and its forked child never interleave halves of their lines
    // (a pipe write up to PIPE_BUF bytes is atomic).
    // SAFETY: the iovecs point into buffers alive for the call; a failed write is ignored.
    unsafe { libc::writev(2, iov.as_ptr(), iov.len() as libc::c_int) };
}

extern "C" fn before_fork() {
    if let Some(Some(s)) = STATE.get() {
        s.table.lock_all();
        s.vmm.raw_lock();
    }
}

extern "C" fn after_fork_parent() {
    if let Some(Some(s)) = STATE.get() {
        // SAFETY: `before_fork` took these locks on this thread.
        unsafe {
            s.vmm.raw_unlock();
            s.table.unlock_all();
        }
    }
}

/// The child starts with no allocations of its own (CUDA state does not survive
/// `fork`) and no monitor (the reporter's own handler resets the rest).
extern "C" fn after_fork_child() {
    if let Some(Some(s)) = STATE.get() {
        // SAFETY: `before_fork` took these locks in the parent; the child's copy
        // has no other thread that could hold them.
        unsafe {
            s.vmm.raw_unlock();
            s.table.unlock_all();
        }
        guard(|| {
            s.table.clear();
            s.vmm.lock().clear();
            s.ring.reset();
            for d in &DEVICES {
                d.reset();
            }
            HOST.reset();
            MONITORS.store(0, Ordering::Relaxed);
        });
    }
}
