//! Wall-clock timestamps for allocation records.
//!
//! `clock_gettime(CLOCK_REALTIME)` is served by the vDSO (no system call), which
//! keeps the timestamp affordable on the allocation path.

/// Unix time in microseconds; 0 if the clock is unreadable (never on Linux).
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(ts.tv_nsec as u64 / 1_000)
}

/// Unix time in milliseconds, the protocol's `t`.
pub fn now_ms() -> i64 {
    (now_us() / 1_000) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_after_2020_and_monotone_enough() {
        let a = now_us();
        let b = now_us();
        assert!(a > 1_577_836_800_000_000, "{a}");
        assert!(b >= a);
        assert_eq!(now_ms() / 1_000_000, (b / 1_000_000_000) as i64);
    }
}
