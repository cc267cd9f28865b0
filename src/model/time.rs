//! Timestamps are Unix milliseconds: cheap to store in every bucket, trivially
//! serialisable, and replay can inject them as the clock.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset, Local, Offset, TimeZone, Timelike, Utc};

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
    match local(t) {
        Some(dt) => format!("{:02}:{:02}:{:02}", dt.hour(), dt.minute(), dt.second()),
        None => "--:--:--".into(),
    }
}

/// How long a looked-up offset from UTC is reused: a change of the machine's time zone
/// shows within this long.
const OFFSET_TTL: Duration = Duration::from_secs(60);
/// Offsets change only at a time-zone transition, and transitions fall on a quarter hour.
const OFFSET_SPAN_MS: Ts = 15 * 60 * 1000;

/// Offsets from UTC by quarter hour, and when they were looked up.
#[derive(Default)]
struct Offsets {
    at: Option<Instant>,
    spans: Vec<(Ts, i32)>,
}

impl Offsets {
    /// The offset at `t`: `lookup`'s answer for `t`'s quarter hour, kept for `OFFSET_TTL`.
    fn get(&mut self, t: Ts, lookup: impl FnOnce(Ts) -> Option<i32>) -> Option<i32> {
        if self.at.is_none_or(|a| a.elapsed() >= OFFSET_TTL) {
            self.at = Some(Instant::now());
            self.spans.clear();
        }
        let span = t.div_euclid(OFFSET_SPAN_MS);
        if let Some((_, off)) = self.spans.iter().find(|(s, _)| *s == span) {
            return Some(*off);
        }
        let off = lookup(t)?;
        // A screen asks about a few quarter hours; a long history about more.
        if self.spans.len() >= 256 {
            self.spans.clear();
        }
        self.spans.push((span, off));
        Some(off)
    }
}

thread_local! {
    static OFFSETS: RefCell<Offsets> = RefCell::new(Offsets::default());
}

/// `t` in the machine's local time. chrono's `Local` checks `/etc/localtime` (a `statx`)
/// at most once a second per thread; a screen labels a dozen times a frame, and that check
/// was 7 % of a redraw. The offset of each quarter hour asked about is kept for
/// `OFFSET_TTL`.
pub fn local(t: Ts) -> Option<DateTime<FixedOffset>> {
    let off = OFFSETS.with_borrow_mut(|o| {
        o.get(t, |t| {
            let dt = Local.timestamp_millis_opt(t).single()?;
            Some(dt.offset().fix().local_minus_utc())
        })
    })?;
    let tz = FixedOffset::east_opt(off)?;
    DateTime::<Utc>::from_timestamp_millis(t).map(|d| d.with_timezone(&tz))
}

/// RFC 3339 in UTC, used in recording headers and logs.
pub fn rfc3339(t: Ts) -> String {
    DateTime::<Utc>::from_timestamp_millis(t)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_is_what_chrono_says_across_a_year_of_quarter_hours() {
        // Every 7 minutes for a year: through both DST changes wherever the tests run.
        let start = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        for i in 0..(366 * 24 * 60 / 7) {
            let t = start + i * 7 * 60 * 1000 + 1234;
            let want = Local.timestamp_millis_opt(t).single().expect("local time");
            let got = local(t).expect("local time");
            assert_eq!(got.naive_local(), want.naive_local(), "at {t}");
            assert_eq!(clock_label(t), want.format("%H:%M:%S").to_string());
        }
    }

    #[test]
    fn an_offset_is_kept_per_quarter_hour_so_a_transition_shows_on_its_side() {
        // A zone that moves from +1 h to +2 h at a quarter hour (as DST does).
        let change: Ts = 1_774_746_000_000; // 2026-03-29T01:00:00Z
        let zone = |t: Ts| Some(if t < change { 3600 } else { 7200 });
        let mut o = Offsets::default();
        let asked = std::cell::Cell::new(0);
        let mut at = |t: Ts| {
            o.get(t, |t| {
                asked.set(asked.get() + 1);
                zone(t)
            })
        };
        assert_eq!(at(change - 1), Some(3600));
        assert_eq!(
            at(change - 14 * 60 * 1000),
            Some(3600),
            "same quarter hour: kept"
        );
        assert_eq!(at(change), Some(7200), "the next quarter hour: asked");
        assert_eq!(at(change + 14 * 60 * 1000), Some(7200));
        assert_eq!(asked.get(), 2);
    }
}
