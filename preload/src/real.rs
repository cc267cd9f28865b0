//! Finding the real functions behind the interposer: glibc's `dlsym`, and driver
//! functions the bookkeeping calls itself.

use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::lifecycle;

pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// glibc's `dlsym`. Public (and a plain word) because the `dlsym` trampoline in
/// `hooks::lookup` reads it from assembly.
pub static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// Versions `dlsym` has had: 2.34 moved it into libc proper; 2.2.5 (x86_64),
/// 2.17 (aarch64) and 2.0 (i386) are the base versions of older glibc.
const DLSYM_VERSIONS: [&CStr; 4] = [c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17", c"GLIBC_2.0"];

/// Resolves glibc's `dlsym`; returns 0 (after one stderr line) if it cannot.
/// `extern "C"` because the trampoline calls it before the first lookup.
pub extern "C" fn init_real_dlsym() -> usize {
    let cur = REAL_DLSYM.load(Ordering::Acquire);
    if cur != 0 {
        return cur;
    }
    let found = bootstrap_once(|| {
        DLSYM_VERSIONS.iter().find_map(|ver| {
            // SAFETY: plain C strings; `dlvsym` is not interposed by this library, and
            // RTLD_NEXT from here skips our own `dlsym`.
            let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), ver.as_ptr()) };
            (!p.is_null()).then_some(p as usize)
        })
    });
    match found {
        Bootstrap::Found(p) => {
            REAL_DLSYM.store(p, Ordering::Release);
            p
        }
        Bootstrap::NotFound => {
            lifecycle::notice("cannot find glibc's dlsym; symbol lookups will fail");
            0
        }
        // A lookup made from inside the bootstrap (glibc < 2.34 allocates the
        // dlerror buffer with malloc when a version is missing; a malloc
        // interposer that resolves lazily calls dlsym): failing that one lookup
        // is the only answer that does not recurse without end.
        Bootstrap::Reentered => 0,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Bootstrap {
    Found(usize),
    NotFound,
    Reentered,
}

/// Thread (kernel tid) running the bootstrap now, 0 when none. A plain atomic:
/// thread-locals may allocate on first use in a shared library, which is the
/// very re-entry this guards against.
static BOOTSTRAP_TID: AtomicUsize = AtomicUsize::new(0);

fn bootstrap_once(resolve: impl FnOnce() -> Option<usize>) -> Bootstrap {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as usize;
    if BOOTSTRAP_TID.load(Ordering::Acquire) == tid {
        return Bootstrap::Reentered;
    }
    // Another thread bootstrapping at the same time is no re-entry: both resolve
    // the same address. Only this thread's own nesting is refused.
    let owned = BOOTSTRAP_TID
        .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok();
    let r = resolve();
    if owned {
        BOOTSTRAP_TID.store(0, Ordering::Release);
    }
    r.map_or(Bootstrap::NotFound, Bootstrap::Found)
}

pub fn real_dlsym() -> Option<DlsymFn> {
    let p = init_real_dlsym();
    // SAFETY: a non-zero value is the address of glibc's `dlsym`.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, DlsymFn>(p) })
}

/// The libcuda handle: one the program looked symbols up on, or libcuda
/// found already loaded under its usual names.
static LIBCUDA: AtomicUsize = AtomicUsize::new(0);

/// Remembers a handle on which a driver symbol was found.
pub fn note_libcuda(handle: *mut c_void) {
    let special = handle.is_null() || handle == libc::RTLD_NEXT || handle == libc::RTLD_DEFAULT;
    if !special {
        let _ = LIBCUDA.compare_exchange(0, handle as usize, Ordering::AcqRel, Ordering::Relaxed);
    }
}

fn libcuda() -> *mut c_void {
    let h = LIBCUDA.load(Ordering::Acquire);
    if h != 0 {
        return h as *mut c_void;
    }
    for name in [c"libcuda.so.1", c"libcuda.so"] {
        // SAFETY: RTLD_NOLOAD never loads anything; it only finds a loaded object.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if !h.is_null() {
            note_libcuda(h);
            return h;
        }
    }
    std::ptr::null_mut()
}

/// The address of a driver function, 0 when no libcuda that has it is loaded.
pub fn driver_sym(name: &CStr) -> usize {
    let Some(dlsym) = real_dlsym() else { return 0 };
    // SAFETY: `name` is a C string; RTLD_NEXT from this library skips our wrappers.
    let p = unsafe { dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !p.is_null() {
        return p as usize;
    }
    let h = libcuda();
    if h.is_null() {
        return 0;
    }
    // SAFETY: `h` is a live handle from the loader.
    unsafe { dlsym(h, name.as_ptr()) as usize }
}

/// A driver function resolved on first use and cached once found.
pub struct DriverFn {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl DriverFn {
    pub const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    pub fn addr(&self) -> usize {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            return a;
        }
        let a = driver_sym(self.name);
        if a != 0 {
            self.addr.store(a, Ordering::Release);
        }
        a
    }

    /// The function as type `F`.
    ///
    /// # Safety
    /// `F` must be the C signature of the named driver function.
    pub unsafe fn get<F: Copy>(&self) -> Option<F> {
        let a = self.addr();
        // SAFETY: `F` is a function pointer type per the caller; `a` is its address.
        (a != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&a) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_from_inside_the_bootstrap_fails_instead_of_recursing() {
        // Another test thread may hold the bootstrap at that moment (then this thread's
        // nesting is not this thread's re-entry and resolves: by design); a few tries
        // find it free, and a bootstrap that never refuses re-entry still fails here.
        let refused = (0..200).any(|_| {
            let inner = std::cell::Cell::new(None);
            let outer = bootstrap_once(|| {
                // What a lazily-resolving malloc interposer would do mid-bootstrap.
                inner.set(Some(bootstrap_once(|| Some(2))));
                Some(1)
            });
            assert_eq!(outer, Bootstrap::Found(1));
            let got = inner.take();
            if got != Some(Bootstrap::Reentered) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            got == Some(Bootstrap::Reentered)
        });
        assert!(
            refused,
            "a nested lookup on the bootstrapping thread was never refused"
        );
        // And afterwards the bootstrap is free again.
        assert_eq!(bootstrap_once(|| Some(3)), Bootstrap::Found(3));
    }

    #[test]
    fn finds_glibc_dlsym_and_libc_functions() {
        let d = real_dlsym();
        assert!(d.is_some());
        // `getpid` is in libc, which comes after this test binary.
        assert_ne!(driver_sym(c"getpid"), 0);
        assert_eq!(driver_sym(c"cuNoSuchFunctionAnywhere"), 0);
        let f = DriverFn::new(c"getppid");
        // SAFETY: `getppid` takes nothing and returns a pid.
        let g = unsafe { f.get::<unsafe extern "C" fn() -> libc::pid_t>() };
        // SAFETY: `g` is `getppid` with its own signature; it has no preconditions.
        let via = g.map(|g| unsafe { g() });
        // SAFETY: `getppid` has no preconditions.
        assert_eq!(via, Some(unsafe { libc::getppid() }));
    }
}
