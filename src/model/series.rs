//! Bounded multi-resolution time series.
//!
//! Every series keeps a fixed number of buckets per tier (fine for recent
//! history, coarse for old history), so a 72-hour run costs the same memory
//! as a 2-hour one. Each bucket keeps min/max/mean so downsampling never hides
//! a spike, and a failed sample is recorded as a gap rather than a zero.

use std::cell::RefCell;
use std::collections::VecDeque;

use super::time::Ts;

/// One aggregated bucket. `n == 0` means the bucket only saw failed samples (a gap).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub start: Ts,
    pub min: f64,
    pub max: f64,
    sum: f64,
    pub n: u32,
}

impl Bucket {
    fn new(start: Ts) -> Self {
        Bucket {
            start,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            sum: 0.0,
            n: 0,
        }
    }

    fn add(&mut self, v: f64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v;
        self.n += 1;
    }

    /// Mean of the samples in the bucket, `None` for a gap.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n))
    }

    pub fn is_gap(&self) -> bool {
        self.n == 0
    }
}

/// Width and depth of one resolution tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub width_ms: i64,
    pub capacity: usize,
}

/// Default tiers: 1 s for 1 h, 15 s for 24 h, 5 min for 7 days.
pub const DEFAULT_TIERS: [Tier; 3] = [
    Tier {
        width_ms: 1_000,
        capacity: 3_600,
    },
    Tier {
        width_ms: 15_000,
        capacity: 5_760,
    },
    Tier {
        width_ms: 300_000,
        capacity: 2_016,
    },
];

/// Upper bound of one series' bucket storage in bytes with the default tiers.
pub const DEFAULT_SERIES_BYTES: usize = (3_600 + 5_760 + 2_016) * std::mem::size_of::<Bucket>();

#[derive(Debug, Clone)]
struct Ring {
    tier: Tier,
    buckets: VecDeque<Bucket>,
    /// Once a ring dropped its oldest bucket it no longer holds the full history.
    evicted: bool,
}

impl Ring {
    fn push(&mut self, t: Ts, v: Option<f64>) {
        let start = t.div_euclid(self.tier.width_ms) * self.tier.width_ms;
        match self.buckets.back_mut() {
            Some(b) if b.start == start => {
                if let Some(v) = v {
                    b.add(v);
                }
                return;
            }
            // Out-of-order samples (clock steps) are merged into the newest bucket
            // rather than breaking the ordering invariant used by queries.
            Some(b) if b.start > start => {
                if let Some(v) = v {
                    b.add(v);
                }
                return;
            }
            _ => {}
        }
        let mut b = Bucket::new(start);
        if let Some(v) = v {
            b.add(v);
        }
        if self.buckets.len() == self.tier.capacity {
            self.buckets.pop_front();
            self.evicted = true;
        }
        self.buckets.push_back(b);
    }

    fn covers(&self, from: Ts) -> bool {
        !self.buckets.is_empty() && (!self.evicted || self.buckets[0].start <= from)
    }
}

/// A bounded multi-resolution series of one metric.
#[derive(Debug, Clone)]
pub struct Series {
    rings: Vec<Ring>,
    last: Option<(Ts, Option<f64>)>,
    /// The last `window_mins` answer: alert rules ask for the same completed windows every
    /// second, and they only change when a window completes (see `WindowMins::still_valid`).
    window_cache: RefCell<Option<WindowMins>>,
}

/// One `window_mins` answer and what it was computed from.
#[derive(Debug, Clone)]
struct WindowMins {
    from_idx: i64,
    last_idx: i64,
    width: i64,
    ring: usize,
    /// Start of the ring's oldest bucket when computed.
    front: Ts,
    mins: Vec<f64>,
}

impl WindowMins {
    /// Pushes only touch the newest bucket (or add newer ones) and evict the oldest, so
    /// an answer computed when the ring's newest bucket already started at or after the
    /// windows' end stays exact while the same ring is read and no bucket at or after
    /// the first window's start was evicted. Only such answers are stored.
    fn still_valid(
        &self,
        from_idx: i64,
        last_idx: i64,
        width: i64,
        ring: usize,
        front: Ts,
    ) -> bool {
        self.from_idx == from_idx
            && self.last_idx == last_idx
            && self.width == width
            && self.ring == ring
            && (front == self.front || front <= from_idx * width)
    }
}

impl Default for Series {
    fn default() -> Self {
        Series::new(&DEFAULT_TIERS)
    }
}

impl Series {
    pub fn new(tiers: &[Tier]) -> Self {
        let rings = tiers
            .iter()
            .map(|&tier| Ring {
                tier,
                buckets: VecDeque::with_capacity(tier.capacity.min(64)),
                evicted: false,
            })
            .collect();
        Series {
            rings,
            last: None,
            window_cache: RefCell::new(None),
        }
    }

    /// Record a value; `None` records a failed sample (a gap in the chart, never a zero).
    pub fn push(&mut self, t: Ts, v: Option<f64>) {
        for r in &mut self.rings {
            r.push(t, v);
        }
        self.last = Some((t, v));
    }

    /// The most recent sample, if it was not a gap.
    pub fn last(&self) -> Option<f64> {
        self.last.and_then(|(_, v)| v)
    }

    pub fn last_time(&self) -> Option<Ts> {
        self.last.map(|(t, _)| t)
    }

    /// Buckets overlapping `[from, to]` from the finest tier that still reaches back
    /// to `from` (or the coarsest tier when none does).
    pub fn window(&self, from: Ts, to: Ts) -> Vec<Bucket> {
        self.window_iter(from, to).copied().collect()
    }

    /// `window` without the copy, for rules that only fold over it.
    pub fn window_iter(&self, from: Ts, to: Ts) -> impl Iterator<Item = &Bucket> {
        let ring = self
            .rings
            .iter()
            .find(|r| r.covers(from))
            .or_else(|| self.rings.iter().rev().find(|r| !r.buckets.is_empty()));
        // Buckets are sorted by start (`Ring::push` keeps it so): two binary searches
        // instead of a scan, as alert rules ask for windows of long series every second.
        let range = ring.map_or(0..0, |ring| {
            let w = ring.tier.width_ms;
            let lo = ring.buckets.partition_point(|b| b.start + w <= from);
            let hi = ring.buckets.partition_point(|b| b.start <= to).max(lo);
            lo..hi
        });
        ring.into_iter()
            .flat_map(move |r| r.buckets.range(range.clone()))
    }

    /// Index of the ring `window_iter` reads for a range starting at `from`.
    fn ring_for(&self, from: Ts) -> Option<usize> {
        self.rings
            .iter()
            .position(|r| r.covers(from))
            .or_else(|| self.rings.iter().rposition(|r| !r.buckets.is_empty()))
    }

    /// Minimum of each fixed window `[i * width, (i + 1) * width)` for `i` in
    /// `from_idx..=last_idx`, over the buckets `window_iter` gives for that span, each
    /// bucket counted in the window its start falls in; gaps are skipped and a window
    /// without samples is `INFINITY`. Cached: alert rules ask for the same windows of
    /// long series every second.
    pub fn window_mins(&self, from_idx: i64, last_idx: i64, width: i64) -> Vec<f64> {
        if width <= 0 || last_idx < from_idx {
            return Vec::new();
        }
        let (lo, end) = (from_idx * width, (last_idx + 1) * width);
        let ring = self.ring_for(lo);
        let front = ring
            .and_then(|i| self.rings[i].buckets.front())
            .map(|b| b.start);
        if let (Some(ring), Some(front)) = (ring, front)
            && let Some(c) = self.window_cache.borrow().as_ref()
            && c.still_valid(from_idx, last_idx, width, ring, front)
        {
            return c.mins.clone();
        }
        // One pass over the buckets (sorted by start), the window boundary only moving
        // forward: no division per bucket.
        let mut mins = vec![f64::INFINITY; (last_idx - from_idx + 1) as usize];
        let (mut k, mut hi) = (0usize, lo + width);
        for b in self.window_iter(lo, end - 1) {
            if b.start < lo || b.is_gap() {
                continue;
            }
            if b.start >= end {
                break;
            }
            while b.start >= hi {
                k += 1;
                hi += width;
            }
            mins[k] = mins[k].min(b.min);
        }
        let settled = ring
            .and_then(|i| self.rings[i].buckets.back())
            .is_some_and(|b| b.start >= end);
        if let (true, Some(ring), Some(front)) = (settled, ring, front) {
            *self.window_cache.borrow_mut() = Some(WindowMins {
                from_idx,
                last_idx,
                width,
                ring,
                front,
                mins: mins.clone(),
            });
        }
        mins
    }

    /// Width of the buckets `window` returns for this range.
    pub fn resolution(&self, from: Ts) -> i64 {
        self.rings
            .iter()
            .find(|r| r.covers(from))
            .or_else(|| self.rings.last())
            .map_or(1_000, |r| r.tier.width_ms)
    }

    /// Maximum and minimum over `[from, to]`, ignoring gaps. Over the ring's two slices
    /// rather than `window_iter`: the grab-all rule asks for two minutes of every process
    /// at every evaluation, and a 24-hour report spent a sixth of its time here.
    pub fn range(&self, from: Ts, to: Ts) -> Option<(f64, f64)> {
        let (a, b) = self.window_slices(from, to);
        let (mut lo, mut hi, mut any) = (f64::INFINITY, f64::NEG_INFINITY, false);
        for bucket in a.iter().chain(b).filter(|b| !b.is_gap()) {
            lo = lo.min(bucket.min);
            hi = hi.max(bucket.max);
            any = true;
        }
        any.then_some((lo, hi))
    }

    /// The buckets of `window_iter` as the (at most two) contiguous runs the ring holds.
    fn window_slices(&self, from: Ts, to: Ts) -> (&[Bucket], &[Bucket]) {
        let Some(ring) = self.ring_for(from).map(|i| &self.rings[i]) else {
            return (&[], &[]);
        };
        let w = ring.tier.width_ms;
        let lo = ring.buckets.partition_point(|b| b.start + w <= from);
        let hi = ring.buckets.partition_point(|b| b.start <= to).max(lo);
        let (front, back) = ring.buckets.as_slices();
        let n = front.len();
        (
            &front[lo.min(n)..hi.min(n)],
            &back[lo.saturating_sub(n)..hi.saturating_sub(n)],
        )
    }

    /// Buckets currently held, over all tiers (for the memory bound test).
    pub fn len(&self) -> usize {
        self.rings.iter().map(|r| r.buckets.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }
}

/// The highest value seen and when: kept apart from the series so downsampling can't erode it.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Peak {
    pub value: u64,
    pub at: Ts,
}

impl Peak {
    pub fn observe(&mut self, t: Ts, v: u64) {
        if v > self.value || self.at == 0 {
            self.value = self.value.max(v);
            self.at = t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_over_the_ring_slices_is_the_fold_over_the_window() {
        // Small tiers so the rings wrap (two slices) and evict; gaps and a NaN among them.
        let tiers = [
            Tier {
                width_ms: 1_000,
                capacity: 50,
            },
            Tier {
                width_ms: 10_000,
                capacity: 20,
            },
        ];
        let mut s = Series::new(&tiers);
        let mut seed = 7u64;
        for i in 0..400i64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match seed >> 60 {
                0 => None,
                1 => Some(f64::NAN),
                r => Some((seed >> 33) as f64 - r as f64),
            };
            s.push(i * 1000, v);
            for (from, to) in [
                (i * 1000 - 120_000, i * 1000),
                (0, i * 500),
                (i * 1000 - 3_000, i * 1000 - 1_000),
            ] {
                let want = s
                    .window_iter(from, to)
                    .filter(|b| !b.is_gap())
                    .fold(None, |acc, b| match acc {
                        None => Some((b.min, b.max)),
                        Some((lo, hi)) => Some((f64::min(lo, b.min), f64::max(hi, b.max))),
                    });
                assert_eq!(s.range(from, to), want, "at {i}: [{from}, {to}]");
            }
        }
    }

    #[test]
    fn gaps_are_not_zeros() {
        let mut s = Series::default();
        s.push(1_000, Some(5.0));
        s.push(2_000, None);
        s.push(3_000, Some(7.0));
        let w = s.window(0, 10_000);
        assert_eq!(w.len(), 3);
        assert!(w[1].is_gap());
        assert_eq!(w[1].mean(), None);
        assert_eq!(s.range(0, 10_000), Some((5.0, 7.0)));
        assert_eq!(s.last(), Some(7.0));
    }

    #[test]
    fn coarse_tier_keeps_spike_after_fine_tier_forgets_it() {
        let tiers = [
            Tier {
                width_ms: 1_000,
                capacity: 10,
            },
            Tier {
                width_ms: 10_000,
                capacity: 10,
            },
        ];
        let mut s = Series::new(&tiers);
        for i in 0..100 {
            let v = if i == 3 { 999.0 } else { 1.0 };
            s.push(i * 1_000, Some(v));
        }
        // Fine tier only reaches back 10 s now, so the query falls to the coarse tier.
        assert_eq!(s.resolution(0), 10_000);
        let w = s.window(0, 100_000);
        assert_eq!(w[0].max, 999.0);
        assert_eq!(w[0].min, 1.0);
        assert_eq!(s.window(95_000, 100_000).len(), 5);
        assert_eq!(s.resolution(95_000), 1_000);
    }

    #[test]
    fn memory_is_bounded_over_a_72_hour_run() {
        let mut s = Series::default();
        let cap: usize = DEFAULT_TIERS.iter().map(|t| t.capacity).sum();
        for i in 0..(72 * 3600) {
            s.push(i * 1_000, Some(i as f64));
        }
        assert!(s.len() <= cap, "{} > {cap}", s.len());
        assert_eq!(s.len(), 3_600 + 5_760 + 72 * 12);
    }

    #[test]
    fn out_of_order_sample_merges_into_newest_bucket() {
        let mut s = Series::default();
        s.push(5_000, Some(1.0));
        s.push(3_000, Some(9.0));
        let w = s.window(0, 10_000);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].max, 9.0);
    }

    /// The cached answer always equals a fresh one: through gaps, out-of-order samples,
    /// evictions of the fine tier and the switch to the coarse one.
    #[test]
    fn window_mins_cache_matches_a_fresh_computation() {
        let tiers = [
            Tier {
                width_ms: 1_000,
                capacity: 50,
            },
            Tier {
                width_ms: 15_000,
                capacity: 40,
            },
        ];
        // One series per query, as the rules ask one kind of window of each series.
        let mut series = [Series::new(&tiers), Series::new(&tiers)];
        let mut hits = 0;
        let mut x: u64 = 7;
        for i in 0..600i64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = match i % 37 {
                0 => i * 1_000 - 4_000, // a clock step back
                // samples lag the clock the windows are read at, by 0–3 s
                _ => i * 1_000 - (x >> 62) as i64 * 1_000 + (x >> 58 & 3) as i64 * 200,
            };
            // falling: a late sample lowers its window's minimum
            let v = (i % 11 != 0).then_some(1e6 - i as f64 * 10.0 + (x >> 61) as f64);
            let now = i * 1_000 + 500;
            let queries = [(10_000i64, 4i64, 20_000i64), (30_000, 3, 0)];
            for (s, (width, keep, start)) in series.iter_mut().zip(queries) {
                s.push(t, v);
                let last = now.div_euclid(width) - 1;
                let from = (start / width).max(last - keep + 1);
                let cached_before = s.window_cache.borrow().clone();
                let got = s.window_mins(from, last, width);
                let fresh = s.clone();
                fresh.window_cache.replace(None);
                assert_eq!(
                    got,
                    fresh.window_mins(from, last, width),
                    "at {now} width {width}"
                );
                hits += usize::from(cached_before.is_some_and(|c| {
                    c.mins == got && c.from_idx == from && c.last_idx == last && c.width == width
                }));
            }
        }
        assert!(hits > 100, "the cache was used {hits} times");
    }

    #[test]
    fn peak_keeps_first_time_of_maximum() {
        let mut p = Peak::default();
        p.observe(10, 5);
        p.observe(20, 9);
        p.observe(30, 9);
        p.observe(40, 3);
        assert_eq!(p, Peak { value: 9, at: 20 });
    }
}
