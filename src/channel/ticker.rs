//! The scanner's clock: one wake-up of the channel's thread a scan, at the next time a scan
//! is due (`at`: where inotify reports changes, that is seconds apart).
//!
//! A `tokio::time::interval` of a second woke the thread three to four times a tick (strace,
//! issue 21): tokio's timer wheel parks only until the start of the wheel slot that holds
//! a far deadline (64 ms slots at this distance) and parks again for the rest, and
//! re-arming the interval from inside the runtime writes the runtime's own wake-up
//! eventfd. A timerfd that the runtime polls like any other file descriptor becomes
//! readable exactly once an expiry, however far. Where a timerfd cannot be made, tokio's
//! interval does the same job at its cost.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::time::{Interval, MissedTickBehavior};

pub(crate) enum Ticker {
    Timerfd(AsyncFd<OwnedFd>),
    Tokio(Interval),
}

impl Ticker {
    /// Ticks at once, then every `period` (a scan that overran skips the ticks it missed).
    /// Must be called inside a tokio runtime.
    pub(crate) fn new(period: Duration) -> Ticker {
        let registered = timerfd(period).ok().and_then(|fd| {
            // SAFETY: an OwnedFd is open and keeps its descriptor until the AsyncFd drops it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
        });
        registered.map_or_else(|| Ticker::interval(period), Ticker::Timerfd)
    }

    /// tokio's interval, with the same ticks: the fallback where no timerfd can be had.
    fn interval(period: Duration) -> Ticker {
        let mut i = tokio::time::interval(period);
        i.set_missed_tick_behavior(MissedTickBehavior::Skip);
        Ticker::Tokio(i)
    }

    /// Ticks once at `deadline` (at once if it has passed), and no more until set again.
    pub(crate) fn at(&mut self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ticker::Timerfd(fd) = self {
            let its = libc::itimerspec {
                it_interval: spec(Duration::ZERO),
                it_value: spec(left.max(Duration::from_nanos(1))),
            };
            // SAFETY: `its` is a valid itimerspec; the old value is not asked for.
            let rc = unsafe {
                libc::timerfd_settime(fd.get_ref().as_raw_fd(), 0, &its, std::ptr::null_mut())
            };
            if rc == 0 {
                return;
            }
            // Never seen; a timer that keeps its old time could stay silent for good.
            *self = Ticker::interval(Duration::from_secs(1));
        }
        if let Ticker::Tokio(i) = self {
            // Its period follows only if nobody sets it again (the scanner always does).
            i.reset_at(tokio::time::Instant::now() + left);
        }
    }

    pub(crate) async fn tick(&mut self) {
        let fd = match self {
            Ticker::Tokio(i) => {
                i.tick().await;
                return;
            }
            Ticker::Timerfd(fd) => fd,
        };
        loop {
            let Ok(mut ready) = fd.readable().await else {
                // The runtime is shutting down: never tick again.
                return std::future::pending().await;
            };
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into an 8-byte buffer from our own timerfd.
            let n = unsafe {
                libc::read(
                    ready.get_inner().as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    8,
                )
            };
            // Read or not (EAGAIN: not expired yet), the timerfd is drained: the next tick
            // waits for the runtime to see it readable again rather than trying a read that
            // fails (tokio keeps a readiness that came after this guard).
            ready.clear_ready();
            if n == 8 {
                return;
            }
        }
    }
}

/// A non-blocking CLOCK_MONOTONIC timerfd that first expires at once, then every `period`.
fn timerfd(period: Duration) -> io::Result<OwnedFd> {
    // SAFETY: plain flags; returns a new fd or -1.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd was just returned to us and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let period = period.max(Duration::from_millis(1));
    let its = libc::itimerspec {
        it_interval: spec(period),
        // Zero would disarm it: the first expiry 1 ns from now is "at once".
        it_value: spec(Duration::from_nanos(1)),
    };
    // SAFETY: `its` is a valid itimerspec; the old value is not asked for.
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &its, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn spec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The timerfd and, where it cannot be had, tokio's interval: both tick the same way.
    fn both(period: Duration) -> [Ticker; 2] {
        let fd = Ticker::new(period);
        assert!(matches!(fd, Ticker::Timerfd(_)), "a timerfd on Linux");
        [fd, Ticker::interval(period)]
    }

    #[tokio::test(flavor = "current_thread")]
    async fn ticks_at_once_then_once_a_period() {
        for mut t in both(Duration::from_millis(40)) {
            let start = Instant::now();
            t.tick().await;
            assert!(
                start.elapsed() < Duration::from_millis(30),
                "the first tick is at once"
            );
            for _ in 0..3 {
                t.tick().await;
            }
            let e = start.elapsed();
            assert!(
                e >= Duration::from_millis(115),
                "three periods later, not sooner: {e:?}"
            );
            assert!(e < Duration::from_millis(1000), "{e:?}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_tick_missed_by_a_long_scan_is_skipped_not_made_up() {
        for mut t in both(Duration::from_millis(20)) {
            t.tick().await;
            std::thread::sleep(Duration::from_millis(110));
            let start = Instant::now();
            t.tick().await;
            assert!(
                start.elapsed() < Duration::from_millis(15),
                "overdue: at once"
            );
            for _ in 0..3 {
                t.tick().await;
            }
            let e = start.elapsed();
            assert!(
                e >= Duration::from_millis(40),
                "the missed ticks are one, not a burst: {e:?}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn set_to_a_time_it_ticks_then_and_only_then() {
        for mut t in both(Duration::from_millis(20)) {
            t.tick().await;
            let start = Instant::now();
            t.at(start + Duration::from_millis(150));
            t.tick().await;
            let e = start.elapsed();
            assert!(e >= Duration::from_millis(145), "not before: {e:?}");
            assert!(e < Duration::from_millis(1000), "{e:?}");
            t.at(Instant::now() + Duration::from_secs(30));
            let quiet = tokio::time::timeout(Duration::from_millis(150), t.tick()).await;
            assert!(quiet.is_err(), "no tick of the old period");
            t.at(Instant::now());
            let past = tokio::time::timeout(Duration::from_millis(100), t.tick()).await;
            assert!(past.is_ok(), "a time passed: at once");
        }
    }
}
