//! Timestamps are Unix milliseconds: cheap to store in every bucket, trivially
//! serialisable, and replay can inject them as the clock.

use chrono::{DateTime, Local, TimeZone, Utc};

/// Unix time in milliseconds.
pub type Ts = i64;

/// Wall-clock now, for live sources only; model code receives time from samples.
pub fn now_ms() -> Ts {
    // What `Utc::now().timestamp_millis()` says, without building a calendar date on every
    // sample (the sampler calls this each tick).
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_millis() as Ts,
        Err(e) => -(e.duration().as_millis() as Ts),
    }
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
