//! What one companion connection may cost gpumon, so that one flooding companion cannot
//! starve the others or the screen.
//!
//! Token buckets, refilled with time: messages per second, bytes per second,
//! and "important" messages (epochs, markers, events, hellos: the ones never
//! coalesced, which would otherwise queue for the main loop and the recorder
//! without bound), one bucket per kind (`wire::Lane`): markers at 20 a second
//! shed markers, never the epochs or OOM reports beside them (before, one
//! shared bucket let 4 of 21 epochs through). A connection over its message or byte budget is simply not
//! read until the bucket refills: the flood waits in the flooder's own socket
//! and queue (where the companion drops and counts it), so it costs gpumon no
//! CPU and costs the other connections nothing. Important messages over their
//! budget are dropped here and counted, since waiting would delay the same
//! connection's samples too.
//!
//! The rates are well above what a real companion sends (the Python companion
//! at `GPUMON_DETAIL=max` sends 20 samples/s per device plus a block map per
//! second, under 200 messages/s on 8 GPUs; the interposer ticks at 10 Hz;
//! epochs and markers come a few per second at most, and the history on
//! connect — at most ~2 MB in ~32 parts — fits the 4-second burst), so only
//! floods are touched. The status line names a connection that goes over.

use std::time::{Duration, Instant};

use crate::wire::Lane;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub msgs_per_s: f64,
    pub bytes_per_s: f64,
    /// Of each kind of important message (`wire::Lane`), each with its own bucket.
    pub important_per_s: f64,
    /// Burst allowance, in seconds of each rate (the history on connect is a burst).
    pub burst_s: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            msgs_per_s: 500.0,
            bytes_per_s: 1024.0 * 1024.0,
            important_per_s: 10.0,
            burst_s: 4.0,
        }
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    cap: f64,
    level: f64,
}

impl Bucket {
    fn new(rate: f64, burst_s: f64) -> Self {
        let cap = (rate * burst_s).max(1.0);
        Bucket {
            rate,
            cap,
            level: cap,
        }
    }

    fn refill(&mut self, dt: f64) {
        self.level = (self.level + self.rate * dt).min(self.cap);
    }

    /// Time until the level is back above zero.
    fn debt(&self) -> Duration {
        if self.level > 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((-self.level + 1.0) / self.rate)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Budget {
    msgs: Bucket,
    bytes: Bucket,
    /// One per `Lane::BUDGETED`, in that order.
    important: [Bucket; Lane::BUDGETED.len()],
    at: Instant,
}

impl Budget {
    pub fn new(r: Rates, now: Instant) -> Self {
        Budget {
            msgs: Bucket::new(r.msgs_per_s, r.burst_s),
            bytes: Bucket::new(r.bytes_per_s, r.burst_s),
            important: Lane::BUDGETED.map(|_| Bucket::new(r.important_per_s, r.burst_s)),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.msgs.refill(dt);
        self.bytes.refill(dt);
        for b in &mut self.important {
            b.refill(dt);
        }
    }

    /// How long to wait before reading more: zero while within budget.
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.msgs.debt().max(self.bytes.debt())
    }

    /// Bytes just read (may go into debt: the read already happened).
    pub fn spend_bytes(&mut self, n: usize) {
        self.bytes.level -= n as f64;
    }

    /// One decoded message.
    pub fn spend_msg(&mut self) {
        self.msgs.level -= 1.0;
    }

    /// One important message of `lane`: false when that lane is over its budget (drop
    /// it). A message of no budgeted lane always passes.
    pub fn take_important(&mut self, lane: Lane, now: Instant) -> bool {
        self.refill(now);
        let Some(i) = Lane::BUDGETED.iter().position(|l| *l == lane) else {
            return true;
        };
        let b = &mut self.important[i];
        if b.level >= 1.0 {
            b.level -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_waits_and_a_trickle_never_does() {
        let t0 = Instant::now();
        let r = Rates {
            msgs_per_s: 100.0,
            bytes_per_s: 1e9,
            important_per_s: 10.0,
            burst_s: 1.0,
        };
        let mut b = Budget::new(r, t0);
        for _ in 0..100 {
            b.spend_msg();
        }
        assert!(b.wait(t0) > Duration::ZERO, "burst used up");
        let w = b.wait(t0);
        assert!(w <= Duration::from_millis(11), "{w:?}");
        // One second later the bucket is full again.
        assert_eq!(b.wait(t0 + Duration::from_secs(1)), Duration::ZERO);

        // 10 important per second pass, the 11th in the same instant does not.
        let mut b = Budget::new(r, t0);
        assert!((0..10).all(|_| b.take_important(Lane::Marker, t0)));
        assert!(!b.take_important(Lane::Marker, t0));
        assert!(b.take_important(Lane::Marker, t0 + Duration::from_millis(100)));
    }

    /// The review's program (C6): `gpumon.mark()` 20 times a second and an epoch a second,
    /// a minute long. With one shared bucket most epochs were dropped (4 of 21 recorded);
    /// each kind has its own now: every epoch and OOM report passes, markers are shed.
    #[test]
    fn markers_at_20_a_second_never_cost_an_epoch_or_an_oom_report() {
        let t0 = Instant::now();
        let mut b = Budget::new(Rates::default(), t0);
        let (mut epochs, mut ooms, mut marks) = (0, 0, 0);
        for step in 0..20 * 60 {
            let now = t0 + Duration::from_millis(50 * step);
            marks += usize::from(b.take_important(Lane::Marker, now));
            if step % 20 == 0 {
                epochs += usize::from(b.take_important(Lane::Epoch, now));
            }
            if step % 200 == 0 {
                ooms += usize::from(b.take_important(Lane::Event, now));
            }
        }
        assert_eq!((epochs, ooms), (60, 6));
        // 10 a second and the 4-second burst: the rest shed.
        assert!((600..=650).contains(&marks), "{marks} markers passed");
        assert!(b.take_important(Lane::None, t0), "unbudgeted messages pass");
    }

    #[test]
    fn bytes_are_budgeted_too() {
        let t0 = Instant::now();
        let r = Rates {
            bytes_per_s: 1000.0,
            burst_s: 1.0,
            ..Rates::default()
        };
        let mut b = Budget::new(r, t0);
        b.spend_bytes(3000);
        let w = b.wait(t0);
        assert!(w >= Duration::from_secs(2), "{w:?}");
    }
}
