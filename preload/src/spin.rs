//! A minimal spin lock whose raw lock/unlock `fork` handling can use.
//!
//! Critical sections here are a hash-map insert or remove. A futex mutex would do
//! as well, but std's guards cannot be held from `pthread_atfork`'s prepare
//! handler until the parent/child handler, which is what keeps a child from
//! inheriting a lock some other (vanished) thread held at fork time.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked`: only the holder of the lock (a
// guard, or a `raw_lock` caller until its `raw_unlock`) reaches it, so sharing the lock
// between threads hands `T` from one thread to another, which `T: Send` allows.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`; moving the lock to another thread moves that `T`, which
// `T: Send` allows, and the flag is an atomic.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.raw_lock();
        SpinGuard { lock: self }
    }

    /// Gives up after `spins` failed attempts (exit handling must not hang).
    pub fn try_lock_for(&self, spins: u32) -> Option<SpinGuard<'_, T>> {
        for _ in 0..spins {
            if self.try_raw() {
                return Some(SpinGuard { lock: self });
            }
            std::thread::yield_now();
        }
        None
    }

    fn try_raw(&self) -> bool {
        !self.locked.load(Ordering::Relaxed)
            && self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Takes the lock without a guard; pair with [`Self::raw_unlock`].
    pub fn raw_lock(&self) {
        let mut spins = 0u32;
        while !self.try_raw() {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // The holder was probably preempted: let it run.
                std::thread::yield_now();
            }
        }
    }

    /// # Safety
    /// Only after [`Self::raw_lock`] by this thread, or in a forked child where
    /// the holder no longer exists and the parent locked it in prepare.
    pub unsafe fn raw_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves the lock is held exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_stay_exact_under_contention() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        assert_eq!(*lock.lock(), 40_000);
    }

    #[test]
    fn try_lock_gives_up_while_held() {
        let lock = SpinLock::new(());
        let held = lock.lock();
        assert!(lock.try_lock_for(3).is_none());
        drop(held);
        assert!(lock.try_lock_for(3).is_some());
    }
}
