//! `fork(2)`: what each part of the interposer does around it.
//!
//! A forked child has one thread, and a copy of every lock as it was at the fork: a lock
//! another thread held then would stay held in the child for good. So each part that has
//! locks registers here what it takes before a fork and lets go after it, and what a child
//! starts with. The bookkeeping (`lifecycle`) registers when it is built, the reporter
//! (`reporter`) when it first starts, which is always later: the bookkeeping exists before
//! anything is recorded, and only recording starts the reporter.
//!
//! pthread runs the `before` handlers newest first and the others oldest first. So the
//! reporter's slot is locked before the tables and vmm (and let go after them), the order
//! in which a thread could hold them, and in the child the tables are emptied before the
//! reporter is reset. Handlers are inherited by the child, so registering again there
//! would run them twice: each part registers once per process tree.

/// What one part does around a fork.
pub struct Handlers {
    /// In the forking thread, before the fork: take the part's locks.
    pub before: extern "C" fn(),
    /// In the parent, after the fork: let them go.
    pub parent: extern "C" fn(),
    /// In the child: let them go and start from what a child has (no reporter thread, no
    /// device memory of its own).
    pub child: extern "C" fn(),
}

/// Registers a part's handlers; false when pthread could not (out of memory).
pub fn on_fork(h: Handlers) -> bool {
    // SAFETY: the handlers are `extern "C" fn()`s of this library, which as a preloaded
    // object is never unloaded, so the registered pointers stay valid for the process.
    unsafe { libc::pthread_atfork(Some(h.before), Some(h.parent), Some(h.child)) == 0 }
}
