//! Timestamps are Unix milliseconds: cheap to store in every bucket, trivially
//! serialisable, and replay can inject them as the clock.

use chrono::{DateTime, Local, TimeZone, Utc};

/// Unix time in milliseconds.
pub type Ts = i64;

/// Wall-clock now, for live sources only; model code receives time from samples.
pub fn now_ms() -> Ts {
    Utc::now().timestamp_millis()
}

/// `HH:MM:SS` in local time, used in peak labels and alert lists.
pub fn clock_label(t: Ts) -> String {
    match Local.timestamp_millis_opt(t).single() {
        Some(dt) => dt.format("%H:%M:%S").to_string(),
        None => "--:--:--".into(),
    }
}

/// RFC 3339 in UTC, used in recording headers and logs.
pub fn rfc3339(t: Ts) -> String {
    DateTime::<Utc>::from_timestamp_millis(t)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Human duration: `45s`, `12m`, `3h05m`, `2d04h`.
pub fn duration_label(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_the_right_unit() {
        assert_eq!(duration_label(45_000), "45s");
        assert_eq!(duration_label(12 * 60_000 + 5), "12m");
        assert_eq!(duration_label(3 * 3_600_000 + 5 * 60_000), "3h05m");
        assert_eq!(duration_label(52 * 3_600_000), "2d04h");
        assert_eq!(duration_label(-5), "0s");
    }
}
