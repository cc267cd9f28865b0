//! Epoch markers for programs that have no companion: a native CUDA
//! program, or any program started through `gpumon run`, can mark the end of an epoch
//!
//! * by calling the exported `gpumon_epoch()` (found with `dlsym(RTLD_DEFAULT, ...)`, so the
//!   program runs unchanged without the interposer), or
//! * by a signal named in `GPUMON_EPOCH_SIGNAL` (`USR1`, `SIGUSR2`, `RTMIN+n`, or the
//!   number of one of those), which a shell can send: `kill -USR2 PID`.
//!
//! Both only bump an atomic counter (async-signal-safe); the reporter thread turns each new
//! count into one `epoch` record per device with `floor` = the live bytes at that moment
//! (exact: the interposer counts allocations, not an allocator's cache) and `peak` = the
//! highest live bytes it saw since the previous marker.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::devices::{DEVICES, MAX_DEVICES};

static REQUESTED: AtomicU64 = AtomicU64::new(0);

/// Marks the end of an epoch. Safe to call from any thread and from a signal handler.
#[unsafe(no_mangle)]
pub extern "C" fn gpumon_epoch() {
    REQUESTED.fetch_add(1, Ordering::Relaxed);
}

extern "C" fn on_signal(_sig: libc::c_int) {
    REQUESTED.fetch_add(1, Ordering::Relaxed);
}

/// `USR1`, `SIGUSR2`, `RTMIN+3`, `10`, `40` -> the signal number; `None` for anything else.
/// Only signals that mean nothing to the program by default are taken:
/// USR1, USR2 and the real-time ones. A handler that only counts would turn SEGV into
/// an endless loop, and TERM, INT or HUP into signals the program no longer obeys.
pub fn parse_signal(s: &str) -> Option<libc::c_int> {
    let t = s.trim().to_ascii_uppercase();
    let name = t.strip_prefix("SIG").unwrap_or(&t);
    let (lo, hi) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let rt = |base: libc::c_int, off: &str, sign: libc::c_int| {
        off.parse::<libc::c_int>().ok().map(|n| base + sign * n)
    };
    let n = match name {
        "USR1" => Some(libc::SIGUSR1),
        "USR2" => Some(libc::SIGUSR2),
        "RTMIN" => Some(lo),
        "RTMAX" => Some(hi),
        _ => {
            if let Some(off) = name.strip_prefix("RTMIN+") {
                rt(lo, off, 1)
            } else if let Some(off) = name.strip_prefix("RTMAX-") {
                rt(hi, off, -1)
            } else {
                name.parse::<libc::c_int>().ok()
            }
        }
    }?;
    (n == libc::SIGUSR1 || n == libc::SIGUSR2 || (lo..=hi).contains(&n)).then_some(n)
}

/// Installed at load (before the program can be sent the signal), only when asked for.
extern "C" fn install_from_env() {
    // SAFETY: getenv with a NUL-terminated name; the result is read at once.
    let raw = unsafe { libc::getenv(c"GPUMON_EPOCH_SIGNAL".as_ptr()) };
    if raw.is_null() {
        return;
    }
    // SAFETY: getenv returned a NUL-terminated string.
    let val = unsafe { std::ffi::CStr::from_ptr(raw) }.to_string_lossy();
    let Some(sig) = parse_signal(&val) else {
        crate::lifecycle::notice(&format!(
            "GPUMON_EPOCH_SIGNAL={val} is not USR1, USR2 or a real-time signal (RTMIN+n); no epoch markers"
        ));
        return;
    };
    // SAFETY: `sa` is a local C struct for which all-zero is a valid value, `sigemptyset` and
    // `sigaction` get pointers to it, `sig` is a catchable signal (`parse_signal` refuses
    // KILL, STOP and out-of-range numbers), and the handler is async-signal-safe: it only
    // increments an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static INSTALL: extern "C" fn() = install_from_env;

/// The reporter's view of the markers: what it has turned into records so far.
#[derive(Debug, Default)]
pub struct Tracker {
    handled: u64,
    start_t: Option<i64>,
    high: Vec<u64>,
}

impl Tracker {
    /// Called every reporter tick (100 ms): follows each device's live bytes for the
    /// epoch peak, and returns one `epoch` record per device for each new marker.
    pub fn tick(&mut self, t: i64) -> Vec<Value> {
        if self.high.len() < MAX_DEVICES {
            self.high.resize(MAX_DEVICES, 0);
        }
        for (i, d) in DEVICES.iter().enumerate() {
            if d.seen.load(Ordering::Relaxed) {
                let live = d.live.load(Ordering::Relaxed);
                self.high[i] = self.high[i].max(live);
            }
        }
        let now = REQUESTED.load(Ordering::Relaxed);
        if now == self.handled {
            return Vec::new();
        }
        // Several markers within one tick are one epoch end each, but share one reading.
        let mut out = Vec::new();
        for n in self.handled..now {
            for (i, d) in DEVICES.iter().enumerate() {
                if !d.seen.load(Ordering::Relaxed) {
                    continue;
                }
                let live = d.live.load(Ordering::Relaxed);
                out.push(json!({
                    "v": crate::protocol::VERSION,
                    "type": "epoch",
                    "t": t,
                    "epoch": n,
                    "dev": i,
                    "floor": live,
                    "peak": self.high[i].max(live),
                    "start_t": self.start_t,
                }));
                self.high[i] = live;
            }
        }
        self.handled = now;
        self.start_t = Some(t);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(parse_signal("USR2"), Some(libc::SIGUSR2));
        assert_eq!(parse_signal("sigusr1"), Some(libc::SIGUSR1));
        assert_eq!(
            parse_signal(&format!(" {} ", libc::SIGUSR2)),
            Some(libc::SIGUSR2)
        );
        assert_eq!(parse_signal("KILL"), None);
        assert_eq!(parse_signal("9"), None);
        assert_eq!(parse_signal("usr3"), None);
        // A counting handler on these would hang a program or make it unkillable.
        for bad in [
            "11", "15", "SEGV", "TERM", "HUP", "2", "1", "17", "28", "0", "65",
        ] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
        let lo = libc::SIGRTMIN();
        assert_eq!(parse_signal("RTMIN"), Some(lo));
        assert_eq!(parse_signal("SIGRTMIN+3"), Some(lo + 3));
        assert_eq!(parse_signal(&(lo + 1).to_string()), Some(lo + 1));
        assert_eq!(parse_signal("RTMAX-1"), Some(libc::SIGRTMAX() - 1));
        assert_eq!(parse_signal("RTMAX+1"), None);
    }

    #[test]
    fn each_marker_is_one_record_per_device() {
        DEVICES[3].add(1 << 20, false);
        let mut tr = Tracker::default();
        tr.tick(1);
        let before = tr.handled;
        gpumon_epoch();
        gpumon_epoch();
        let recs: Vec<Value> = tr.tick(2).into_iter().filter(|v| v["dev"] == 3).collect();
        assert_eq!(
            recs.len(),
            (REQUESTED.load(Ordering::Relaxed) - before) as usize
        );
        assert!(recs.iter().all(|r| r["floor"].as_u64() >= Some(1 << 20)));
        assert!(tr.tick(3).is_empty());
    }
}
