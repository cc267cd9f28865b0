//! The scanner's clock: one wake-up of the channel's thread a scan, at the next time a scan
//! is due (`at`: where inotify reports changes, that is seconds apart).
//!
//! A `tokio::time::interval` of a second woke the thread three to four times a tick (strace):
//! tokio's timer wheel parks only until the start of the wheel slot that holds a far
//! deadline (64 ms slots at this distance) and parks again for the rest, and
//! re-arming from inside the runtime writes the runtime's own wake-up eventfd. A timerfd
//! that the runtime polls like any other file descriptor becomes readable exactly once an
//! expiry, however far. Where a timerfd cannot be made, tokio's sleep does the same job at
//! its cost.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::time::Sleep;

pub(crate) enum Ticker {
    Timerfd(AsyncFd<OwnedFd>),
    Tokio(Pin<Box<Sleep>>),
}

/// A fired sleep is set this far ahead until `at` sets it again: it ticks once an `at`.
const IDLE: Duration = Duration::from_secs(24 * 3600);

impl Ticker {
    /// Ticks at once, then only at the times `at` sets. Must be called inside a tokio
    /// runtime.
    pub(crate) fn new() -> Ticker {
        let registered = timerfd().ok().and_then(|fd| {
            // SAFETY: an OwnedFd is open and keeps its descriptor until the AsyncFd drops it.
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
        });
        registered.map_or_else(Ticker::sleep, Ticker::Timerfd)
    }

    /// tokio's sleep, with the same ticks: the fallback where no timerfd can be had.
    fn sleep() -> Ticker {
        Ticker::Tokio(Box::pin(tokio::time::sleep(Duration::ZERO)))
    }

    /// Ticks once at `deadline` (at once if it has passed), and no more until set again.
    pub(crate) fn at(&mut self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ticker::Timerfd(fd) = self {
            if arm(fd.get_ref(), left).is_ok() {
                return;
            }
            // Never seen; a timer that keeps its old time could stay silent for good.
            *self = Ticker::sleep();
        }
        if let Ticker::Tokio(s) = self {
            s.as_mut().reset(tokio::time::Instant::now() + left);
        }
    }

    pub(crate) async fn tick(&mut self) {
        let fd = match self {
            Ticker::Tokio(s) => {
                s.as_mut().await;
                s.as_mut().reset(tokio::time::Instant::now() + IDLE);
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

/// A non-blocking CLOCK_MONOTONIC timerfd that expires at once.
fn timerfd() -> io::Result<OwnedFd> {
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
    arm(&fd, Duration::ZERO)?;
    Ok(fd)
}

/// Expire once, `left` from now (zero would disarm it: 1 ns is "at once").
fn arm(fd: &OwnedFd, left: Duration) -> io::Result<()> {
    let its = libc::itimerspec {
        it_interval: spec(Duration::ZERO),
        it_value: spec(left.max(Duration::from_nanos(1))),
    };
    // SAFETY: `its` is a valid itimerspec; the old value is not asked for.
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &its, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

    /// The timerfd and, where it cannot be had, tokio's sleep: both tick the same way.
    fn both() -> [Ticker; 2] {
        let fd = Ticker::new();
        assert!(matches!(fd, Ticker::Timerfd(_)), "a timerfd on Linux");
        [fd, Ticker::sleep()]
    }

    #[tokio::test(flavor = "current_thread")]
    async fn ticks_at_once_then_only_when_set() {
        for mut t in both() {
            let start = Instant::now();
            t.tick().await;
            assert!(
                start.elapsed() < Duration::from_millis(30),
                "the first tick is at once"
            );
            let quiet = tokio::time::timeout(Duration::from_millis(150), t.tick()).await;
            assert!(quiet.is_err(), "no second tick unless set");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_time_missed_by_a_long_scan_ticks_once_not_in_a_burst() {
        for mut t in both() {
            t.tick().await;
            t.at(Instant::now() + Duration::from_millis(20));
            std::thread::sleep(Duration::from_millis(110));
            let start = Instant::now();
            t.tick().await;
            assert!(
                start.elapsed() < Duration::from_millis(15),
                "overdue: at once"
            );
            let again = tokio::time::timeout(Duration::from_millis(60), t.tick()).await;
            assert!(again.is_err(), "the missed time is one tick, not a burst");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn set_to_a_time_it_ticks_then_and_only_then() {
        for mut t in both() {
            t.tick().await;
            let start = Instant::now();
            t.at(start + Duration::from_millis(150));
            t.tick().await;
            let e = start.elapsed();
            assert!(e >= Duration::from_millis(145), "not before: {e:?}");
            assert!(e < Duration::from_millis(1000), "{e:?}");
            t.at(Instant::now() + Duration::from_secs(30));
            let quiet = tokio::time::timeout(Duration::from_millis(150), t.tick()).await;
            assert!(quiet.is_err(), "not before the time set");
            t.at(Instant::now());
            let past = tokio::time::timeout(Duration::from_millis(100), t.tick()).await;
            assert!(past.is_ok(), "a time passed: at once");
        }
    }
}
