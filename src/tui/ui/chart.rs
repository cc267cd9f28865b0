//! Time and value geometry shared by every chart: a fixed time grid (so the past never
//! changes as time moves on), reduction of a series onto it (max per slot: spikes survive,
//! gaps stay gaps), round value scales in GiB/MiB, and wall-clock ticks.
//! Drawing lives in `plot.rs`; this file never touches a buffer except the one-row sparkline.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::theme::Theme;
use crate::model::series::Series;
use crate::model::time::Ts;
use crate::tui::app::Window;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Col {
    /// No data for this time (before the first sample).
    None,
    /// Samples were attempted and failed.
    Gap,
    Val(f64),
}

impl Col {
    pub(crate) fn val(self) -> Option<f64> {
        match self {
            Col::Val(v) => Some(v),
            _ => None,
        }
    }
}

/// Slot widths a grid may use, in ms. Neighbours differ by at most 1.33x so a history
/// shorter than the window still fills at least three quarters of the chart.
const STEPS: [i64; 40] = [
    50, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 600, 750, 1_000, 1_250, 1_500, 2_000,
    2_500, 3_000, 4_000, 5_000, 6_000, 7_500, 10_000, 12_500, 15_000, 20_000, 25_000, 30_000,
    40_000, 50_000, 60_000, 75_000, 90_000, 120_000, 150_000, 180_000, 240_000, 300_000, 450_000,
];

/// `n` slots of `step` ms ending with the slot that holds `now`. Slot edges are multiples
/// of `step` in absolute time, so a slot covers the same interval in every frame: as time
/// passes, cells move left whole, and none changes value (no shimmer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    pub start: Ts,
    pub step: i64,
    pub n: usize,
}

impl Grid {
    /// The grid for `n` slots that covers at least `span` ms up to `now`.
    pub(crate) fn new(now: Ts, span: i64, n: usize) -> Grid {
        let n = n.max(1);
        let want = (span.max(1) as f64 / n as f64).ceil() as i64;
        let step = STEPS
            .iter()
            .copied()
            .find(|&s| s >= want)
            .unwrap_or_else(|| {
                // Longer than 15 min per slot (days on a narrow pane): whole minutes.
                (want + 59_999) / 60_000 * 60_000
            });
        let end = (now.div_euclid(step) + 1) * step;
        Grid {
            start: end - step * n as i64,
            step,
            n,
        }
    }

    /// `n` slots spanning `span` ms (to within `n` ms: the step is rounded up to whole ms)
    /// up to `now`: the axis shows what the zoom's label says. Slot edges are multiples of
    /// the step, so data enters at the right and moves left whole.
    pub(crate) fn span(now: Ts, span: i64, n: usize) -> Grid {
        let n = n.max(1);
        let step = (span.max(1) + n as i64 - 1) / n as i64;
        let end = (now.div_euclid(step) + 1) * step;
        Grid {
            start: end - step * n as i64,
            step,
            n,
        }
    }

    /// The grid for a chart under the zoom: a fixed span, or with `Window::All` the history
    /// since `first` fitted to the chart (steps from `STEPS`, so the past does not shimmer
    /// while the history grows; ten seconds at least, so the first samples are not a wall).
    pub(crate) fn window(now: Ts, first: Option<Ts>, w: Window, n: usize) -> Grid {
        match w {
            Window::Span(ms) => Grid::span(now, ms, n),
            Window::All => {
                let history = first.map_or(0, |f| (now - f).max(0));
                Grid::new(now, history.max(10_000), n)
            }
        }
    }

    pub(crate) fn end(&self) -> Ts {
        self.start + self.step * self.n as i64
    }

    /// Slot holding time `t`, if it is on the grid.
    pub(crate) fn slot(&self, t: Ts) -> Option<usize> {
        if t < self.start || t >= self.end() {
            return None;
        }
        Some(((t - self.start) / self.step) as usize)
    }
}

/// Reduce a series onto the grid: the maximum of the buckets each slot overlaps.
pub(crate) fn sample(series: &Series, g: &Grid) -> Vec<Col> {
    let mut cols = vec![Col::None; g.n];
    let res = series.resolution(g.start);
    for b in series.window(g.start, g.end()) {
        // A bucket covers [start, start + res): mark every slot it overlaps.
        let s0 = (b.start - g.start).div_euclid(g.step).max(0) as usize;
        let s1 = (b.start + res - 1 - g.start).div_euclid(g.step);
        if s1 < 0 {
            continue;
        }
        let s1 = (s1 as usize).min(g.n - 1);
        for c in cols.iter_mut().take(s1 + 1).skip(s0) {
            *c = match (*c, b.is_gap()) {
                (Col::Val(v), false) => Col::Val(v.max(b.max)),
                (Col::Val(v), true) => Col::Val(v),
                (_, false) => Col::Val(b.max),
                (_, true) => Col::Gap,
            };
        }
    }
    cols
}

/// A sparse series (one value per allocator report) on a grid finer than its reports:
/// each value holds until the next, so the row does not read as a run of missing data.
/// Before the first value and after the last nothing is filled.
pub(crate) fn hold(mut cols: Vec<Col>) -> Vec<Col> {
    let mut last = None;
    let end = cols.iter().rposition(|c| c.val().is_some()).unwrap_or(0);
    for c in cols.iter_mut().take(end) {
        match *c {
            Col::Val(v) => last = Some(v),
            Col::None => {
                if let Some(v) = last {
                    *c = Col::Val(v);
                }
            }
            Col::Gap => last = None,
        }
    }
    cols
}

/// Lowest and highest value over the slots, ignoring gaps.
pub(crate) fn extent(cols: &[Col]) -> Option<(f64, f64)> {
    cols.iter()
        .filter_map(|c| c.val())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = MIB * 1024.0;

/// A value axis: `lo..hi` in bytes, ticks every `tick`, labelled in `unit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub tick: f64,
    unit: f64,
    unit_name: &'static str,
}

impl Scale {
    /// A round scale for data in `[lo, hi]` drawn over `rows` rows. With `full` the axis
    /// runs from zero to that value (the card's total). Otherwise it fits the data: from
    /// zero when the data reaches down near it, else from a round value under the data, so
    /// a 12 MiB/epoch leak on a 60 GiB process is a visible slope, not a flat line.
    /// `cap` (the card's total) keeps a round-up from running past what the card holds.
    pub(crate) fn fit(lo: f64, hi: f64, rows: u16, full: Option<f64>, cap: f64) -> Scale {
        let intervals = f64::from((rows / 3).clamp(1, 5));
        let (lo, hi) = match full {
            Some(t) if t > 0.0 => (0.0, t.max(hi)),
            _ => (lo.max(0.0), hi.max(lo).max(MIB)),
        };
        // Zero-based when the data reaches down near zero, and when it is flat (under 0.2%
        // of its level): a band around a constant would only magnify noise.
        let flat = hi - lo < hi * 0.002;
        let lo_fit = if lo < hi * 0.5 || flat { 0.0 } else { lo };
        let span = (hi - lo_fit).max(hi * 0.005).max(MIB);
        let unit = if hi >= GIB { GIB } else { MIB };
        let tick = nice_step(span / intervals, unit);
        // Off zero, keep half a tick of room on each side so a flat line is not drawn
        // on the frame.
        let pad = if lo_fit > 0.0 { tick * 0.5 } else { 0.0 };
        let mut s_lo = ((lo_fit - pad) / tick).floor().max(0.0) * tick;
        let mut s_hi = ((hi + pad) / tick).ceil() * tick;
        if full.is_some() {
            s_lo = 0.0;
            s_hi = s_hi.max(hi);
        }
        if s_hi <= s_lo {
            s_hi = s_lo + tick;
        }
        if cap > 0.0 && s_hi > cap && hi <= cap {
            s_hi = cap;
        }
        let (unit, unit_name) = if s_hi >= GIB {
            (GIB, "GiB")
        } else {
            (MIB, "MiB")
        };
        Scale {
            lo: s_lo,
            hi: s_hi,
            tick,
            unit,
            unit_name,
        }
    }

    /// The 0..1 axis of an index (the fragmentation index F).
    pub(crate) fn unit_fraction() -> Scale {
        Scale {
            lo: 0.0,
            hi: 1.0,
            tick: 0.5,
            unit: 1.0,
            unit_name: "",
        }
    }

    /// Position of `v` as a fraction of the axis height (clamped to 0..1).
    pub(crate) fn frac(&self, v: f64) -> f64 {
        ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    /// Tick values from bottom to top: round multiples, and the top when it is the cap.
    pub(crate) fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        let n = ((self.hi - self.lo) / self.tick + 1e-9).floor() as i64;
        let last = self.lo + n as f64 * self.tick;
        let top = (self.hi - last > self.tick * 0.25).then_some(self.hi);
        (0..=n)
            .map(move |i| self.lo + i as f64 * self.tick)
            .chain(top)
    }

    /// `label` in at most `w` characters: without the space before the unit if need be.
    pub(crate) fn label_in(&self, v: f64, w: usize) -> String {
        let l = self.label(v);
        if l.len() <= w {
            return l;
        }
        // `140 GiB`, not `140.4GiB`: the unit keeps its space, the decimals go.
        let x = v / self.unit;
        let whole = format!("{x:.0} {}", self.unit_name);
        if whole.len() <= w {
            whole
        } else {
            l.replacen(' ', "", 1)
        }
    }

    /// `20 GiB`, `2.5 GiB`, `512 MiB`: every label of one axis in the same unit.
    pub(crate) fn label(&self, v: f64) -> String {
        let x = v / self.unit;
        let decimals = if (self.tick / self.unit).fract().abs() < 1e-9 && x.fract().abs() < 1e-9 {
            0
        } else if (self.tick / self.unit * 10.0).fract().abs() < 1e-6 {
            1
        } else {
            2
        };
        format!("{x:.decimals$} {}", self.unit_name)
    }
}

/// 10^n as the nearest double (what the system's `pow` gives, and a literal `1eN` is; the
/// `libm` crate's pow and `powi` can be one unit off): a table over the exponents a scale
/// meets, parsed beyond it.
fn pow10(n: i32) -> f64 {
    const TABLE: [f64; 31] = [
        1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2,
        1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    ];
    usize::try_from(n.saturating_add(12))
        .ok()
        .and_then(|i| TABLE.get(i).copied())
        .unwrap_or_else(|| format!("1e{n}").parse().unwrap_or(f64::NAN))
}

/// 1, 2, 2.5 or 5 times a power of ten of `unit` (GiB or MiB), at least `raw`: ticks then
/// read as round numbers in the unit the axis is labelled in.
fn nice_step(raw: f64, unit: f64) -> f64 {
    let x = (raw / unit).max(1e-9);
    let e = libm::log10(x).floor();
    let p = if e.is_finite() {
        pow10(e as i32)
    } else {
        f64::NAN
    };
    let m = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * p >= x * (1.0 - 1e-9))
        .unwrap_or(10.0);
    (m * p * unit).max(if unit == MIB { MIB } else { 0.0 })
}

/// Wall-clock tick interval for a grid `cells` wide: round times (`16:54:30`) spaced so
/// that a label of `label_w` characters fits between neighbours.
pub(crate) fn time_ticks(g: &Grid, cells: u16, label_w: usize) -> (i64, Vec<(u16, Ts)>) {
    const EVERY: [i64; 17] = [
        1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
        1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000,
    ];
    let span = g.end() - g.start;
    let per_cell = span as f64 / f64::from(cells.max(1));
    let min_gap = (label_w + 2) as f64 * per_cell;
    let every = EVERY
        .iter()
        .copied()
        .find(|&e| e as f64 >= min_gap)
        .unwrap_or(86_400_000);
    let mut out = Vec::new();
    let mut t = (g.start.div_euclid(every) + 1) * every;
    while t < g.end() {
        let col = ((t - g.start) as f64 / per_cell).floor() as u16;
        out.push((col.min(cells.saturating_sub(1)), t));
        t += every;
    }
    (every, out)
}

/// One-row sparkline scaled to `scale`, one cell per slot.
pub(crate) fn sparkline(
    buf: &mut Buffer,
    area: Rect,
    cols: &[Col],
    scale: &Scale,
    theme: &Theme,
    style: Style,
) {
    for (i, c) in cols.iter().enumerate().take(usize::from(area.width)) {
        let x = area.x + i as u16;
        let (ch, st) = match *c {
            Col::None => (' ', theme.dim()),
            Col::Gap => (theme.gap(), theme.dim()),
            // At the floor (an idle card): the lowest bar, dimmed, so a row of zeros
            // reads as "nothing used" rather than "no data".
            Col::Val(v) if v <= scale.lo => (theme.bar(1.0 / 8.0), theme.dim()),
            // Anything above the axis floor stays visible.
            Col::Val(v) => (theme.bar(scale.frac(v).max(1.0 / 8.0)), style),
        };
        buf[(x, area.y)].set_char(ch).set_style(st);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow10_is_the_nearest_double_inside_its_table_and_beyond() {
        for n in -15..=21 {
            let want: f64 = format!("1e{n}").parse().expect("a number");
            assert_eq!(super::pow10(n).to_bits(), want.to_bits(), "10^{n}");
        }
    }

    use super::*;

    fn series(values: &[(i64, Option<f64>)]) -> Series {
        let mut s = Series::default();
        for &(t, v) in values {
            s.push(t, v);
        }
        s
    }

    #[test]
    fn slots_keep_spikes_and_gaps() {
        let mut pts = Vec::new();
        for i in 0..60 {
            let v = match i {
                17 => Some(100.0),
                40 => None,
                _ => Some(10.0),
            };
            pts.push((i * 1_000, v));
        }
        let s = series(&pts);
        let g = Grid::new(59_999, 60_000, 6);
        assert_eq!((g.start, g.step), (0, 10_000));
        let cols = sample(&s, &g);
        assert_eq!(cols[1], Col::Val(100.0), "spike survives a 10:1 reduction");
        assert_eq!(cols[0], Col::Val(10.0));
        assert_eq!(
            cols[4],
            Col::Val(10.0),
            "one failed sample among good ones is data"
        );
        let fine = sample(&s, &Grid::new(59_999, 60_000, 60));
        assert_eq!(fine[40], Col::Gap);
        let before = sample(&s, &Grid::new(59_999, 120_000, 4));
        assert_eq!(before[0], Col::None);
    }

    #[test]
    fn past_slots_never_change_as_time_moves_on() {
        // A wobbly series sampled every 250 ms; redraw every 100 ms for a minute and check
        // that every slot that is complete keeps its value in every later frame.
        let mut s = Series::default();
        let mut seen: std::collections::BTreeMap<Ts, f64> = Default::default();
        for k in 0..2_400i64 {
            let t = k * 250;
            s.push(t, Some(((k * 7919) % 97) as f64));
            if k < 400 {
                continue;
            }
            for dt in [0, 100, 200] {
                let now = t + dt;
                let g = Grid::new(now, 60_000, 37);
                let cols = sample(&s, &g);
                for (i, c) in cols.iter().enumerate() {
                    let slot_start = g.start + i as i64 * g.step;
                    // Complete: every sample of the slot (and its 1 s bucket) is in.
                    if slot_start + g.step + 1_000 > now {
                        continue;
                    }
                    let v = c.val().expect("complete slots hold data");
                    let old = *seen.entry(slot_start).or_insert(v);
                    assert_eq!(old, v, "slot at {slot_start} changed at now={now}");
                }
            }
        }
        assert!(seen.len() > 100);
    }

    #[test]
    fn a_short_history_fills_most_of_the_chart() {
        for secs in [11, 17, 40, 95, 200, 86_400] {
            let now = 1_000_000_000;
            let g = Grid::window(now, Some(now - secs * 1_000), Window::All, 144);
            let covered = (now - (now - secs * 1_000).max(g.start)) as f64;
            let frac = covered / (g.end() - g.start) as f64;
            assert!(
                frac >= 0.6,
                "{secs} s of history fills {frac:.2} of the chart"
            );
        }
    }

    #[test]
    fn a_span_spans_what_its_label_says_and_scrolls() {
        for (span, n) in [
            (10_000, 142),
            (30_000, 71),
            (300_000, 144),
            (604_800_000, 60),
        ] {
            let g = Grid::span(1_700_000_037_123, span, n);
            let shown = g.end() - g.start;
            assert!(
                shown >= span && shown - span < n as i64,
                "{span} over {n}: {shown}"
            );
            assert!(
                g.slot(1_700_000_037_123) == Some(n - 1),
                "now is the last slot"
            );
            // Later, the same instants sit in the same slots, further left.
            let later = Grid::span(1_700_000_037_123 + 10 * g.step, span, n);
            assert_eq!(later.step, g.step);
            assert_eq!(later.start, g.start + 10 * g.step);
        }
        // The history does not stretch a span: 20 s of data on a 5m axis is its right end.
        let now = 1_000_000;
        let g = Grid::window(now, Some(now - 20_000), Window::Span(300_000), 100);
        assert!(g.end() - g.start >= 300_000);
    }

    #[test]
    fn held_values_fill_between_reports_only() {
        let v = Col::Val;
        let cols = vec![
            Col::None,
            v(1.0),
            Col::None,
            Col::None,
            v(2.0),
            Col::Gap,
            Col::None,
            v(3.0),
            Col::None,
        ];
        assert_eq!(
            hold(cols),
            [
                Col::None,
                v(1.0),
                v(1.0),
                v(1.0),
                v(2.0),
                Col::Gap,
                Col::None,
                v(3.0),
                Col::None
            ]
        );
    }

    #[test]
    fn scales_are_round_and_fit_the_data() {
        let s = Scale::fit(0.0, 17.0 * GIB, 12, None, 140.0 * GIB);
        assert_eq!((s.lo, s.hi, s.tick), (0.0, 20.0 * GIB, 5.0 * GIB));
        let labels: Vec<_> = s.ticks().map(|v| s.label(v)).collect();
        assert_eq!(labels, ["0 GiB", "5 GiB", "10 GiB", "15 GiB", "20 GiB"]);
        // A narrow band high up: the axis starts under the data, not at zero.
        let leak = Scale::fit(60.0 * GIB, 60.3 * GIB, 12, None, 140.0 * GIB);
        assert!(leak.lo > 59.0 * GIB && leak.hi < 61.0 * GIB, "{leak:?}");
        assert_eq!(leak.label(leak.tick), "0.1 GiB");
        // Flat: from zero, so a constant 113 GiB reads as 113 GiB, not as a line in a band.
        assert_eq!(
            Scale::fit(113.0 * GIB, 113.0 * GIB, 12, None, 140.0 * GIB).lo,
            0.0
        );
        assert!(leak.frac(60.3 * GIB) - leak.frac(60.0 * GIB) > 0.3);
        // Full-card scale: zero to the total, whatever the data.
        let full = Scale::fit(1.0 * GIB, 2.0 * GIB, 12, Some(140.0 * GIB), 140.0 * GIB);
        assert_eq!(full.lo, 0.0);
        assert!(full.hi >= 140.0 * GIB);
        let small = Scale::fit(0.0, 300.0 * MIB, 6, None, 140.0 * GIB);
        assert_eq!(small.label(small.hi), "400 MiB");
        // A full card on a two-row chart: the axis stops at the total, not at 200 GiB.
        let busy = Scale::fit(0.0, 139.6 * GIB, 2, None, 140.4 * GIB);
        assert_eq!(busy.hi, 140.4 * GIB);
        assert_eq!(busy.label(busy.hi), "140.4 GiB");
    }

    #[test]
    fn clock_ticks_sit_on_round_times() {
        let g = Grid::new(1_700_000_037_000, 300_000, 144);
        let (every, ticks) = time_ticks(&g, 72, 8);
        assert!(every >= 30_000, "{every}");
        assert!(ticks.len() >= 2);
        for (_, t) in &ticks {
            assert_eq!(t % every, 0);
        }
        assert!(ticks.windows(2).all(|w| w[1].0 > w[0].0 + 8));
    }

    #[test]
    fn ascii_sparkline_is_ascii_and_monotonic() {
        let theme = Theme {
            ascii: true,
            color: false,
            utc: true,
        };
        let cols = [
            Col::None,
            Col::Gap,
            Col::Val(0.0),
            Col::Val(10.0),
            Col::Val(50.0),
            Col::Val(75.0),
            Col::Val(100.0),
        ];
        let scale = Scale {
            lo: 0.0,
            hi: 100.0,
            tick: 50.0,
            unit: 1.0,
            unit_name: "",
        };
        let area = Rect::new(0, 0, 7, 1);
        let mut buf = Buffer::empty(area);
        sparkline(&mut buf, area, &cols, &scale, &theme, Style::new());
        let line: String = (0..7).map(|x| buf[(x, 0)].symbol().to_string()).collect();
        assert_eq!(line, " x..:|#");
    }
}
