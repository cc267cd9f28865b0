//! What the engine remembers about each process between evaluations, for rules that need
//! a signal's course across epochs rather than its latest value:
//!
//! * `num_alloc_retries` at each epoch end: the allocator found no room under its ceiling,
//!   flushed its cache and retried. A rise during recent epochs means the run already lives
//!   on what the flush can give back.
//! * the largest hole L at every block-map reading since the previous epoch end: at the
//!   epoch end the step's big transient blocks are free again and merge, so L looks fine
//!   exactly when the next peak will not fit; the lowest reading (the one taken at the
//!   step's peak) is the one that matters.

use std::collections::{BTreeMap, VecDeque};

use crate::model::time::Ts;

use super::inputs::{FragView, ProcView};

/// Epoch ends remembered per process (retries are compared over the last two).
const EPOCHS_KEPT: usize = 4;
/// Block-map readings kept per process: those of the last two epochs, at most this many.
const READINGS_KEPT: usize = 64;

#[derive(Debug, Clone, Default)]
struct ProcMemory {
    /// (epoch, retries at its end)
    retries: VecDeque<(u64, u64)>,
    /// Block-map readings (time, L) since the end of the epoch before the last.
    holes: VecDeque<(Ts, u64)>,
    /// Whole block-map readings over the same span, for the cache-fit rule.
    readings: VecDeque<FragView>,
    /// The largest live block of each reading, over a longer span (older companions send
    /// no recurring requests: a size that comes and goes is one).
    blocks: VecDeque<u64>,
    /// The largest free blocks of the newest block maps, whatever the epochs (a freed hole
    /// must recur across maps, and short epochs hold fewer than one map each).
    free_tops: VecDeque<Vec<u64>>,
    /// `alternating_block` of `blocks`, worked out when they change (at a block map)
    /// instead of at every evaluation.
    alternating: Option<(u64, u64)>,
    last_epoch_t: Option<Ts>,
    prev_epoch_t: Option<Ts>,
}

#[derive(Debug, Clone, Default)]
pub struct Memory {
    procs: BTreeMap<(u32, u32), ProcMemory>,
}

impl Memory {
    /// Takes in what is new in `p` (call once per evaluation, before the rules).
    pub fn observe(&mut self, p: &ProcView) {
        let Some(c) = &p.companion else { return };
        let m = self.procs.entry((p.pid, p.gpu)).or_default();
        if let Some(e) = c.epochs.last()
            && m.retries.back().is_none_or(|(n, _)| *n < e.epoch)
        {
            if let Some(r) = c.retries {
                m.retries.push_back((e.epoch, r));
                while m.retries.len() > EPOCHS_KEPT {
                    m.retries.pop_front();
                }
            }
            m.prev_epoch_t = m.last_epoch_t;
            m.last_epoch_t = Some(e.t);
        }
        if let Some(f) = &c.frag
            && m.readings.back().is_none_or(|r| r.t < f.t)
        {
            if let Some(l) = f.largest_free {
                m.holes.push_back((f.t, l));
            }
            m.readings.push_back(f.clone());
            m.free_tops.push_back(f.free_top.clone());
            while m.free_tops.len() > super::cache_fit::HOLE_SPAN {
                m.free_tops.pop_front();
            }
            if let Some(b) = f.largest_block {
                m.blocks.push_back(b);
                while m.blocks.len() > READINGS_KEPT {
                    m.blocks.pop_front();
                }
                m.alternating = alternating(&m.blocks);
            }
        }
        let keep_from = m.prev_epoch_t.unwrap_or(Ts::MIN);
        while m.holes.len() > 1 && m.holes.front().is_some_and(|(t, _)| *t < keep_from) {
            m.holes.pop_front();
        }
        while m.readings.len() > READINGS_KEPT
            || (m.readings.len() > 1 && m.readings.front().is_some_and(|r| r.t < keep_from))
        {
            m.readings.pop_front();
        }
    }

    /// Block-map readings of the current and the previous epoch, oldest first.
    /// The largest free blocks of the newest `cache_fit::HOLE_SPAN` block maps.
    pub fn recent_free_tops(&self, pid: u32, gpu: u32) -> impl Iterator<Item = &[u64]> {
        self.procs
            .get(&(pid, gpu))
            .into_iter()
            .flat_map(|m| m.free_tops.iter().map(|v| v.as_slice()))
    }

    pub fn readings(&self, pid: u32, gpu: u32) -> impl Iterator<Item = &FragView> {
        self.procs
            .get(&(pid, gpu))
            .into_iter()
            .flat_map(|m| m.readings.iter())
    }

    /// The largest live-block size that came and went (seen, then a reading without it,
    /// then seen again), with how many times it came back: a request the program makes
    /// again and again, for companions that do not report `requests`.
    pub fn alternating_block(&self, pid: u32, gpu: u32) -> Option<(u64, u64)> {
        self.procs.get(&(pid, gpu))?.alternating
    }

    /// Retries added during the last one or two completed epochs (0: none; `None`: the
    /// framework does not count retries or fewer than two epochs were seen).
    pub fn recent_retries(&self, pid: u32, gpu: u32) -> Option<u64> {
        let m = self.procs.get(&(pid, gpu))?;
        let (_, newest) = *m.retries.back()?;
        let base = m.retries.iter().rev().nth(2).or(m.retries.front())?.1;
        (m.retries.len() >= 2).then(|| newest.saturating_sub(base))
    }

    /// The smallest largest-hole reading over the current and the previous epoch.
    pub fn smallest_hole(&self, pid: u32, gpu: u32) -> Option<u64> {
        self.procs
            .get(&(pid, gpu))?
            .holes
            .iter()
            .map(|(_, l)| *l)
            .min()
    }

    /// Forgets processes that are no longer evaluated.
    pub fn retain(&mut self, live: &[(u32, u32)]) {
        self.procs.retain(|k, _| live.contains(k));
    }
}

/// The largest size in `blocks` that came back at least twice, with how many times.
fn alternating(blocks: &VecDeque<u64>) -> Option<(u64, u64)> {
    // rises: a reading with v after one without it (the first sighting counts); one
    // pass for every size at once.
    let mut rises: BTreeMap<u64, u64> = BTreeMap::new();
    let mut prev = None;
    for &x in blocks {
        if prev != Some(x) {
            *rises.entry(x).or_default() += 1;
        }
        prev = Some(x);
    }
    rises.into_iter().rev().find(|&(_, n)| n >= 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alerts::inputs::{CompanionView, EpochPoint};

    fn view(epoch: u64, t: Ts, retries: u64, hole: Option<(Ts, u64)>) -> ProcView {
        ProcView {
            pid: 7,
            gpu: 0,
            companion: Some(CompanionView {
                epochs: vec![EpochPoint {
                    epoch,
                    t,
                    ..EpochPoint::default()
                }],
                retries: Some(retries),
                frag: hole.map(|(t, l)| FragView {
                    t,
                    free_total: 1 << 30,
                    largest_free: Some(l),
                    largest_block: None,
                    ..FragView::default()
                }),
                ..CompanionView::default()
            }),
            ..ProcView::default()
        }
    }

    #[test]
    fn retries_are_counted_over_the_last_epochs() {
        let mut m = Memory::default();
        m.observe(&view(1, 1_000, 0, None));
        assert_eq!(m.recent_retries(7, 0), None, "one epoch: no course yet");
        m.observe(&view(2, 2_000, 0, None));
        assert_eq!(m.recent_retries(7, 0), Some(0));
        m.observe(&view(3, 3_000, 2, None));
        m.observe(&view(3, 3_500, 5, None)); // same epoch: not a new point
        assert_eq!(m.recent_retries(7, 0), Some(2));
        m.observe(&view(4, 4_000, 2, None));
        m.observe(&view(5, 5_000, 2, None));
        m.observe(&view(6, 6_000, 2, None));
        assert_eq!(m.recent_retries(7, 0), Some(0), "old retries age out");
    }

    #[test]
    fn the_hole_at_the_peak_is_remembered_past_the_epoch_end() {
        let mut m = Memory::default();
        m.observe(&view(1, 1_000, 0, Some((900, 600))));
        m.observe(&view(1, 1_000, 0, Some((1_400, 20)))); // at the step's peak
        m.observe(&view(2, 2_000, 0, Some((2_000, 640)))); // epoch end: big block free again
        assert_eq!(m.smallest_hole(7, 0), Some(20));
        m.observe(&view(3, 3_000, 0, Some((3_000, 640))));
        m.observe(&view(4, 4_000, 0, Some((4_000, 640))));
        assert_eq!(
            m.smallest_hole(7, 0),
            Some(640),
            "older epochs are forgotten"
        );
    }
}
