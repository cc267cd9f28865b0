//! Min/max downsampling: a series of any length kept in a bounded number of time buckets,
//! each with its minimum and maximum, so a one-tick spike in a 24-hour run still reaches
//! the page. Buckets double in width (adjacent pairs merge) when the run outgrows them;
//! the page then folds them into one column per pixel.

use crate::model::time::Ts;

/// Buckets kept per series before two neighbours merge: above any chart's pixel width,
/// so the last fold to pixels still has a bucket per column.
pub const CAPACITY: usize = 4096;

/// The values seen in one stretch of time; `n == 0` is a gap (nothing was seen).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Col {
    pub min: f64,
    pub max: f64,
    pub n: u32,
}

impl Col {
    const EMPTY: Col = Col {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        n: 0,
    };

    fn add(&mut self, v: f64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.n = self.n.saturating_add(1);
    }

    fn merge(&mut self, o: &Col) {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.n = self.n.saturating_add(o.n);
    }
}

/// One series: buckets of `width` ms from `start`.
#[derive(Debug, Clone)]
pub struct MinMax {
    start: Ts,
    width: i64,
    cols: Vec<Col>,
    cap: usize,
}

/// One pixel column of a chart: its index and the range of values drawn in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pixel {
    pub x: usize,
    pub min: f64,
    pub max: f64,
    /// Time of the column's left edge (to tell a gap from a sparse series).
    pub t: Ts,
}

impl MinMax {
    /// A series starting at `start` with buckets of `width` ms (at least 1) until it outgrows them.
    pub fn new(start: Ts, width: i64) -> MinMax {
        MinMax::with_capacity(start, width, CAPACITY)
    }

    pub fn with_capacity(start: Ts, width: i64, cap: usize) -> MinMax {
        MinMax {
            start,
            width: width.max(1),
            cols: Vec::new(),
            cap: cap.max(2),
        }
    }

    pub fn push(&mut self, t: Ts, v: f64) {
        if !v.is_finite() {
            return;
        }
        let mut i = self.index(t);
        while i >= self.cap {
            self.fold();
            i = self.index(t);
        }
        if self.cols.len() <= i {
            self.cols.resize(i + 1, Col::EMPTY);
        }
        self.cols[i].add(v);
    }

    fn index(&self, t: Ts) -> usize {
        (t.saturating_sub(self.start).max(0) / self.width) as usize
    }

    /// Merge neighbours: half the buckets, twice as wide.
    fn fold(&mut self) {
        let cols = std::mem::take(&mut self.cols);
        self.cols = cols
            .chunks(2)
            .map(|pair| {
                let mut c = pair[0];
                if let Some(b) = pair.get(1) {
                    c.merge(b);
                }
                c
            })
            .collect();
        self.width = self.width.saturating_mul(2);
    }

    pub fn is_empty(&self) -> bool {
        self.cols.iter().all(|c| c.n == 0)
    }

    /// Smallest and largest value seen.
    pub fn range(&self) -> Option<(f64, f64)> {
        let seen = self.cols.iter().filter(|c| c.n > 0);
        let lo = seen.clone().map(|c| c.min).reduce(f64::min)?;
        let hi = seen.map(|c| c.max).reduce(f64::max)?;
        Some((lo, hi))
    }

    /// Time of the first and last bucket that saw a value.
    pub fn span(&self) -> Option<(Ts, Ts)> {
        let first = self.cols.iter().position(|c| c.n > 0)?;
        let last = self.cols.iter().rposition(|c| c.n > 0)?;
        Some((self.bucket_t(first), self.bucket_t(last) + self.width))
    }

    fn bucket_t(&self, i: usize) -> Ts {
        self.start + i as Ts * self.width
    }

    /// Fold the buckets into `width` pixel columns over `[t0, t1)`: each column keeps the
    /// minimum and maximum of the buckets that start in it; columns that saw nothing are
    /// left out.
    pub fn pixels(&self, t0: Ts, t1: Ts, width: usize) -> Vec<Pixel> {
        let span = (t1 - t0).max(1) as f64;
        let mut out: Vec<Pixel> = Vec::new();
        for (i, c) in self.cols.iter().enumerate() {
            if c.n == 0 {
                continue;
            }
            let t = self.bucket_t(i);
            if t < t0 || t >= t1 {
                continue;
            }
            let x = (((t - t0) as f64 / span) * width as f64) as usize;
            let x = x.min(width.saturating_sub(1));
            match out.last_mut() {
                Some(p) if p.x == x => {
                    p.min = p.min.min(c.min);
                    p.max = p.max.max(c.max);
                }
                _ => out.push(Pixel {
                    x,
                    min: c.min,
                    max: c.max,
                    t,
                }),
            }
        }
        out
    }

    /// Current bucket width in ms (for tests and the gap rule).
    pub fn width(&self) -> i64 {
        self.width
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_spike_survives_any_amount_of_folding() {
        let mut s = MinMax::with_capacity(0, 1000, 64);
        for i in 0..86_400 {
            let v = if i == 50_000 { 900.0 } else { 100.0 };
            s.push(i * 1000, v);
        }
        assert!(s.width() >= 86_400_000 / 64, "folded: {}", s.width());
        assert!(s.cols.len() <= 64);
        let px = s.pixels(0, 86_400_000, 40);
        assert!(px.len() <= 40);
        let spikes: Vec<_> = px.iter().filter(|p| p.max == 900.0).collect();
        assert_eq!(
            spikes.len(),
            1,
            "the spike is in exactly one column: {px:?}"
        );
        assert!(px.iter().all(|p| p.min == 100.0), "the baseline everywhere");
        // The spike stays where it happened (50000 s of 86400 s across 40 columns), give or
        // take the one column a bucket's start can move it.
        assert!(
            spikes[0].x.abs_diff(50_000 * 40 / 86_400) <= 1,
            "{:?}",
            spikes[0]
        );
    }

    #[test]
    fn a_dip_survives_too_and_gaps_stay_gaps() {
        let mut s = MinMax::with_capacity(0, 1000, 16);
        for i in 0..100 {
            if (40..60).contains(&i) {
                continue; // nothing seen: a gap, not a zero
            }
            s.push(i * 1000, if i == 7 { 1.0 } else { 50.0 });
        }
        let px = s.pixels(0, 100_000, 100);
        assert!(px.iter().any(|p| p.min == 1.0));
        assert!(px.iter().all(|p| p.min > 0.0), "no invented zero");
        let xs: Vec<usize> = px.iter().map(|p| p.x).collect();
        assert!(
            !xs.iter().any(|&x| (45..55).contains(&x)),
            "no column inside the gap: {xs:?}"
        );
        assert_eq!(s.range(), Some((1.0, 50.0)));
    }

    #[test]
    fn short_series_keep_every_point_and_their_span() {
        let mut s = MinMax::new(10_000, 500);
        for i in 0..10 {
            s.push(10_000 + i * 500, i as f64);
        }
        assert_eq!(s.span(), Some((10_000, 15_000)));
        let px = s.pixels(10_000, 15_000, 1000);
        assert_eq!(px.len(), 10);
        assert_eq!(px[3].x, 300);
        assert_eq!((px[3].min, px[3].max), (3.0, 3.0));
        assert!(MinMax::new(0, 1).is_empty());
        s.push(20_000, f64::NAN);
        assert_eq!(s.span(), Some((10_000, 15_000)), "NaN is not a value");
    }
}
