//! Bounded lock-free queue of allocation events on their way to the reporter
//! (D. Vyukov's bounded MPMC queue: one CAS per push, no allocation). When the
//! reporter falls behind the queue is full, the event is dropped and counted;
//! the counters and the live table stay exact regardless.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Event {
    pub t_us: u64,
    pub addr: u64,
    pub size: u64,
    pub stream: u64,
    pub dev: u16,
    /// `b'+'` or `b'-'`.
    pub op: u8,
    pub kind: u8,
}

struct Cell {
    seq: AtomicUsize,
    ev: UnsafeCell<Event>,
}

pub struct Ring {
    cells: Box<[Cell]>,
    mask: usize,
    head: AtomicUsize,
    tail: AtomicUsize,
    dropped: AtomicU64,
}

// SAFETY: a cell's event is written only by the producer that won its slot via
// `tail` and read only by the consumer that won it via `head`; `seq` orders the two.
unsafe impl Sync for Ring {}
// SAFETY: the ring owns its cells, and an `Event` is plain integers with no tie to the
// thread that wrote it, so the whole ring may move to another thread.
unsafe impl Send for Ring {}

impl Ring {
    /// `capacity` is rounded up to a power of two.
    pub fn new(capacity: usize) -> Self {
        let cap = capacity.max(2).next_power_of_two();
        let cells = (0..cap)
            .map(|i| Cell {
                seq: AtomicUsize::new(i),
                ev: UnsafeCell::new(Event::default()),
            })
            .collect();
        Self {
            cells,
            mask: cap - 1,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    pub fn push(&self, ev: Event) -> bool {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.seq.load(Ordering::Acquire);
            let dif = seq as isize - pos as isize;
            if dif == 0 {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS gives this thread the slot.
                        unsafe { *cell.ev.get() = ev };
                        cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return true;
                    }
                    Err(seen) => pos = seen,
                }
            } else if dif < 0 {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    pub fn pop(&self) -> Option<Event> {
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.seq.load(Ordering::Acquire);
            let dif = seq as isize - pos.wrapping_add(1) as isize;
            if dif == 0 {
                match self.head.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS gives this thread the slot.
                        let ev = unsafe { *cell.ev.get() };
                        cell.seq
                            .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
                        return Some(ev);
                    }
                    Err(seen) => pos = seen,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Empties the queue in a forked child, where a producer may have vanished
    /// between claiming a slot and publishing it.
    pub fn reset(&self) {
        for (i, c) in self.cells.iter().enumerate() {
            c.seq.store(i, Ordering::Relaxed);
        }
        self.head.store(0, Ordering::Relaxed);
        self.tail.store(0, Ordering::Release);
        self.dropped.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ev(addr: u64) -> Event {
        Event {
            addr,
            op: b'+',
            ..Event::default()
        }
    }

    #[test]
    fn fifo_and_full() {
        let r = Ring::new(4);
        for a in 0..4 {
            assert!(r.push(ev(a)));
        }
        assert!(!r.push(ev(99)));
        assert_eq!(r.dropped(), 1);
        for a in 0..4 {
            assert_eq!(r.pop().map(|e| e.addr), Some(a));
        }
        assert!(r.pop().is_none());
        assert!(r.push(ev(5)));
        assert_eq!(r.pop().map(|e| e.addr), Some(5));
    }

    #[test]
    fn concurrent_producers_lose_nothing_that_fits() {
        let r = Arc::new(Ring::new(1 << 16));
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        assert!(r.push(ev((p << 32) | i)));
                    }
                })
            })
            .collect();
        for p in producers {
            assert!(p.join().is_ok());
        }
        let mut seen = Vec::new();
        while let Some(e) = r.pop() {
            seen.push(e.addr);
        }
        assert_eq!(seen.len(), 40_000);
        // Each producer's own events come out in its order.
        for p in 0..4u64 {
            let mine: Vec<u64> = seen.iter().filter(|a| *a >> 32 == p).copied().collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn reset_empties() {
        let r = Ring::new(8);
        r.push(ev(1));
        r.reset();
        assert!(r.pop().is_none());
        assert!(r.push(ev(2)));
        assert_eq!(r.pop().map(|e| e.addr), Some(2));
    }
}
