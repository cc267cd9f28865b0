//! What one companion may cost the recording: a hostile
//! companion filled disks at ~100 GB/h through the recorder (markers, epochs
//! and 64 KiB histograms re-sent as fast as possible).
//!
//! Applied in the recorder's thread, on the frames as they are written, by
//! gpumon's own arrival clock (`Frame::Companion.t`):
//! - periodic messages (`sample`, `alloc`, `link`) are kept at most every
//!   `PERIODIC_MS` per process, device and type — the model needs the newest
//!   state, not every one of a flood;
//! - a `frag` (block map) identical to the last one recorded for that device
//!   (ignoring its time and cost) is not recorded again, and a changed one at
//!   most every `FRAG_MS`;
//! - everything a companion records is held to `BYTES_PER_S` (burst
//!   `BURST_BYTES`, which fits the history sent on connect).
//!
//! Markers and epochs are already limited per connection by the channel's
//! budget (10 per second). Skipped frames are counted and a status frame in
//! the recording says how many (at most one per `NOTE_MS` per companion).
//! Worst case, per companion: `BYTES_PER_S` = 128 KiB/s, i.e. 450 MiB per
//! hour plus one short status line per 10 s (docs/recording-format.md).

use std::collections::HashMap;

use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::model::time::Ts;
use crate::wire::{Frag, Message};

pub const PERIODIC_MS: i64 = 50;
pub const FRAG_MS: i64 = 1_000;
pub const BYTES_PER_S: f64 = 128.0 * 1024.0;
pub const BURST_BYTES: f64 = 4.0 * 1024.0 * 1024.0;
pub const NOTE_MS: i64 = 10_000;
/// Companions tracked at once; past it the table starts afresh (bounded memory).
const MAX_TRACKED: usize = 4096;

#[derive(Default)]
struct PerPid {
    level: f64,
    at: Ts,
    last_periodic: HashMap<(u32, &'static str), Ts>,
    last_frag: HashMap<u32, (Ts, Frag)>,
    skipped: u64,
    noted_at: Option<Ts>,
}

#[derive(Default)]
pub struct RecordBudget {
    pids: HashMap<u32, PerPid>,
}

/// A block map as compared for "unchanged": without its time and cost.
fn frag_key(f: &Frag) -> Frag {
    Frag {
        t: None,
        cost_us: None,
        ..f.clone()
    }
}

impl RecordBudget {
    /// Whether to write `frame` (of `size` encoded bytes); a status frame to
    /// write after it when frames of this companion were skipped lately.
    pub fn admit(&mut self, frame: &Frame, size: usize) -> (bool, Option<Frame>) {
        let Frame::Companion(c) = frame else {
            return (true, None);
        };
        if let Message::Disconnected(_) = c.msg {
            let note = self
                .pids
                .remove(&c.pid)
                .and_then(|p| note(c.pid, c.t, p.skipped));
            return (true, note);
        }
        if self.pids.len() >= MAX_TRACKED && !self.pids.contains_key(&c.pid) {
            self.pids.clear();
        }
        let p = self.pids.entry(c.pid).or_insert_with(|| PerPid {
            level: BURST_BYTES,
            at: c.t,
            ..PerPid::default()
        });
        let dt = (c.t - p.at).max(0) as f64 / 1000.0;
        p.at = p.at.max(c.t);
        p.level = (p.level + dt * BYTES_PER_S).min(BURST_BYTES);
        let dev = c.msg.dev().unwrap_or(0);
        let keep = match &c.msg {
            Message::Sample(_) | Message::Alloc(_) | Message::Link(_) => {
                let k = (dev, c.msg.type_name());
                let due = p
                    .last_periodic
                    .get(&k)
                    .is_none_or(|&last| c.t - last >= PERIODIC_MS);
                if due {
                    p.last_periodic.insert(k, c.t);
                }
                due
            }
            Message::Frag(f) => {
                let key = frag_key(f);
                let keep = p
                    .last_frag
                    .get(&dev)
                    .is_none_or(|(last_t, last)| *last != key && c.t - last_t >= FRAG_MS);
                if keep {
                    p.last_frag.insert(dev, (c.t, key));
                }
                keep
            }
            _ => true,
        };
        let keep = keep && p.level >= size as f64;
        if keep {
            p.level -= size as f64;
        } else {
            p.skipped += 1;
        }
        let due = p.noted_at.is_none_or(|at| c.t - at >= NOTE_MS);
        if p.skipped > 0 && due && keep {
            p.noted_at = Some(c.t);
            let n = std::mem::take(&mut p.skipped);
            return (keep, note(c.pid, c.t, n));
        }
        (keep, None)
    }
}

fn note(pid: u32, t: Ts, skipped: u64) -> Option<Frame> {
    (skipped > 0).then(|| {
        Frame::status(t, StatusSource::Recorder,
            Level::Info,
            format!(
                "companion {pid}: {skipped} repeated or over-budget frames not recorded (recording budget)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::CompanionFrame;
    use crate::wire::{Marker, Sample};

    fn cf(t: Ts, msg: Message) -> Frame {
        Frame::Companion(CompanionFrame { t, pid: 7, msg })
    }

    #[test]
    fn a_sample_flood_is_thinned_to_the_periodic_rate() {
        let mut b = RecordBudget::default();
        let kept = (0..1000)
            .filter(|i| b.admit(&cf(*i, Message::Sample(Sample::default())), 100).0)
            .count();
        assert_eq!(kept, 20, "1 s of samples every ms: one per 50 ms");
    }

    #[test]
    fn an_unchanged_histogram_is_recorded_once() {
        let mut b = RecordBudget::default();
        let f = Frag {
            hist: Some(vec![(3, 1, 8)]),
            ..Frag::default()
        };
        let kept = (0..100)
            .filter(|i| b.admit(&cf(i * 2000, Message::Frag(f.clone())), 3000).0)
            .count();
        assert_eq!(kept, 1);
        let changed = Frag {
            hist: Some(vec![(3, 2, 16)]),
            ..Frag::default()
        };
        assert!(b.admit(&cf(300_000, Message::Frag(changed)), 3000).0);
    }

    #[test]
    fn bytes_are_held_to_the_budget_and_the_skips_are_noted() {
        let mut b = RecordBudget::default();
        let m = || Message::Marker(Marker::default());
        let mut written = 0.0;
        let mut notes = 0;
        // 60 s of 64 KiB markers, 100 per second.
        for i in 0..6000 {
            let (keep, note) = b.admit(&cf(i * 10, m()), 65536);
            if keep {
                written += 65536.0;
            }
            notes += usize::from(note.is_some());
        }
        assert!(
            written <= BURST_BYTES + 60.0 * BYTES_PER_S + 65536.0,
            "{written}"
        );
        assert!(written >= 60.0 * BYTES_PER_S * 0.9, "{written}");
        assert!((5..=7).contains(&notes), "{notes}");
    }
}
