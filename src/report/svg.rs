//! Chart primitives for the page: a time × bytes plot drawn as inline SVG paths (no script,
//! no fonts to fetch), with a real time axis (UTC clock), a zero-based byte axis, series
//! folded to one min/max column per pixel, points, epoch ticks and labelled lines. Colours
//! live in the page's CSS (classes), so the SVG stays plain geometry.

use std::fmt::Write;

use crate::fmt::human;
use crate::model::time::Ts;
use crate::report::minmax::MinMax;

pub const WIDTH: f64 = 1000.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 12.0;
/// Rows of labels, baseline to baseline: 11-unit text with a gap.
const ROW: f64 = 14.0;
const BOTTOM: f64 = 34.0;

/// Text is escaped for HTML and SVG alike.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

pub struct Chart {
    t0: Ts,
    t1: Ts,
    ymax: f64,
    height: f64,
    body: String,
    /// Labels on top of the geometry, drawn last.
    labels: String,
    /// Boxes of the line labels placed so far (x0, x1, baseline), so that a new label moves
    /// to a free spot instead of overprinting one.
    placed: Vec<(f64, f64, f64)>,
    /// Labels left out for want of a free spot (their lines are drawn).
    unlabelled: usize,
}

impl Chart {
    /// A plot of `[t0, t1]` × `[0, ymax]` bytes, `height` units tall (the width is `WIDTH`).
    pub fn new(t0: Ts, t1: Ts, ymax: f64, height: f64) -> Chart {
        Chart {
            t0,
            t1: t1.max(t0 + 1000),
            ymax: nice_max(ymax),
            height,
            body: String::new(),
            labels: String::new(),
            placed: Vec::new(),
            unlabelled: 0,
        }
    }

    /// The top of the byte axis.
    pub fn top(&self) -> f64 {
        self.ymax
    }

    pub fn plot_width() -> usize {
        (WIDTH - LEFT - RIGHT) as usize
    }

    pub fn x(&self, t: Ts) -> f64 {
        LEFT + (t - self.t0) as f64 / (self.t1 - self.t0) as f64 * (WIDTH - LEFT - RIGHT)
    }

    pub fn y(&self, v: f64) -> f64 {
        let h = self.height - TOP - BOTTOM;
        TOP + h - (v / self.ymax).clamp(-0.02, 1.02) * h
    }

    fn bottom(&self) -> f64 {
        self.height - BOTTOM
    }

    pub fn contains(&self, t: Ts) -> bool {
        t >= self.t0 && t <= self.t1
    }

    /// Grid, byte labels on the left, UTC clock labels under the plot.
    pub fn axes(&mut self) {
        let step = byte_step(self.ymax);
        let mut grid = String::new();
        let mut v = 0.0;
        while v <= self.ymax * 1.0001 {
            let y = self.y(v);
            let _ = write!(grid, "M{LEFT:.1} {y:.1}H{:.1}", WIDTH - RIGHT);
            let _ = write!(
                self.labels,
                r#"<text class="ylab" x="{:.1}" y="{:.1}">{}</text>"#,
                LEFT - 6.0,
                y + 4.0,
                esc(&axis_label(v, self.ymax))
            );
            v += step;
        }
        let (tstep, secs) = time_step(self.t1 - self.t0);
        let mut t = (self.t0 + tstep - 1).div_euclid(tstep) * tstep;
        let mut ticks = String::new();
        // `time_step` gives at most ten labels; the count and the checked step are a guard
        // against an axis no recording should reach.
        let mut labels = 0;
        while t <= self.t1 && labels < 64 {
            labels += 1;
            let x = self.x(t);
            let _ = write!(ticks, "M{x:.1} {:.1}v5", self.bottom());
            let _ = write!(grid, "M{x:.1} {TOP:.1}V{:.1}", self.bottom());
            let _ = write!(
                self.labels,
                r#"<text class="tlab" x="{x:.1}" y="{:.1}">{}</text>"#,
                self.bottom() + 17.0,
                clock(t, secs)
            );
            let Some(next) = t.checked_add(tstep) else {
                break;
            };
            t = next;
        }
        let _ = write!(
            self.body,
            r#"<path class="grid" d="{grid}"/><path class="axis" d="M{LEFT:.1} {TOP:.1}V{b:.1}H{r:.1}{ticks}"/>"#,
            b = self.bottom(),
            r = WIDTH - RIGHT,
        );
        let _ = write!(
            self.labels,
            r#"<text class="tlab unit" x="{:.1}" y="{:.1}">UTC</text>"#,
            WIDTH - RIGHT,
            self.height - 2.0
        );
    }

    /// A series folded to one column per pixel; each column is drawn from its minimum to its
    /// maximum, so a spike shorter than a pixel still shows. A silence longer than `gap_ms`
    /// (or three columns) breaks the line instead of bridging it.
    pub fn series(&mut self, s: &MinMax, class: &str, gap_ms: i64) {
        let px = s.pixels(self.t0, self.t1, Self::plot_width());
        if px.is_empty() {
            return;
        }
        let col_ms = (self.t1 - self.t0) / Self::plot_width() as i64;
        let gap = gap_ms.max(3 * col_ms);
        let mut d = String::with_capacity(px.len() * 24);
        let mut prev_t: Option<Ts> = None;
        for p in &px {
            let x = LEFT + p.x as f64;
            let (ya, yb) = (self.y(p.max), self.y(p.min));
            let cmd = match prev_t {
                Some(pt) if p.t - pt <= gap => 'L',
                _ => 'M',
            };
            let _ = write!(d, "{cmd}{x:.1} {ya:.1}");
            if (ya - yb).abs() >= 0.1 {
                let _ = write!(d, "L{x:.1} {yb:.1}");
            } else if cmd == 'M' {
                // A lone point still draws: a short tick.
                let _ = write!(d, "h1");
            }
            prev_t = Some(p.t);
        }
        let _ = write!(self.body, r#"<path class="{class}" d="{d}"/>"#);
    }

    /// Dots (e.g. epoch floors), one small diamond each.
    pub fn points(&mut self, pts: &[(Ts, u64)], class: &str) {
        let mut d = String::new();
        for &(t, v) in pts.iter().filter(|(t, _)| self.contains(*t)) {
            let (x, y) = (self.x(t), self.y(v as f64));
            let _ = write!(d, "M{x:.1} {:.1}l3 3l-3 3l-3 -3Z", y - 3.0);
        }
        if !d.is_empty() {
            let _ = write!(self.body, r#"<path class="{class}" d="{d}"/>"#);
        }
    }

    /// Epoch ends as ticks along the bottom of the plot, numbered where there is room.
    pub fn epoch_ticks(&mut self, epochs: &[(Ts, u64)]) {
        let mut d = String::new();
        let mut last_label = f64::NEG_INFINITY;
        let (t0, t1) = (self.t0, self.t1);
        for &(t, e) in epochs.iter().filter(|(t, _)| (t0..=t1).contains(t)) {
            let x = self.x(t);
            let _ = write!(d, "M{x:.1} {:.1}v-6", self.bottom());
            if x - last_label >= 42.0 {
                let _ = write!(
                    self.labels,
                    r#"<text class="elab" x="{x:.1}" y="{:.1}">{e}</text>"#,
                    self.bottom() - 8.0
                );
                last_label = x;
            }
        }
        if !d.is_empty() {
            let _ = write!(self.body, r#"<path class="epoch" d="{d}"/>"#);
            let _ = write!(
                self.labels,
                r#"<text class="elab" x="{:.1}" y="{:.1}" text-anchor="end">epoch</text>"#,
                LEFT - 6.0,
                self.bottom() - 8.0
            );
        }
    }

    /// A horizontal line at `v` bytes, labelled at its right end (`left`: at its left end),
    /// above the line, or under it when that spot is taken.
    pub fn hline(&mut self, v: u64, class: &str, label: &str, left: bool) {
        let y = self.y(v as f64);
        let _ = write!(
            self.body,
            r#"<path class="{class}" d="M{LEFT:.1} {y:.1}H{:.1}"/>"#,
            WIDTH - RIGHT
        );
        let (x, anchor) = if left {
            (LEFT + 4.0, "start")
        } else {
            (WIDTH - RIGHT - 4.0, "end")
        };
        let ys = [y - 4.0, y + 14.0, y - 18.0, y + 28.0];
        if let Some(at) = self.place(x, anchor, label, &ys) {
            self.label(x, at, class, label, anchor);
        }
    }

    /// A vertical line at `t`, labelled at its top (lower when that spot is taken).
    pub fn vline(&mut self, t: Ts, class: &str, label: &str) {
        self.vline_bare(t, class);
        self.vline_label(t, class, label);
    }

    /// A vertical line at `t` with no label of its own (`vline_label` names a group).
    pub fn vline_bare(&mut self, t: Ts, class: &str) {
        if !self.contains(t) {
            return;
        }
        let x = self.x(t);
        let _ = write!(
            self.body,
            r#"<path class="{class}" d="M{x:.1} {TOP:.1}V{:.1}"/>"#,
            self.bottom()
        );
    }

    /// The label of a vertical line at `t`: at the top, lower when that spot is taken.
    pub fn vline_label(&mut self, t: Ts, class: &str, label: &str) {
        if !self.contains(t) {
            return;
        }
        let x = self.x(t);
        let anchor = if x > WIDTH * 0.8 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        if let Some(at) = self.place(x + dx, anchor, label, &[TOP + 14.0]) {
            self.label(x + dx, at, class, label, anchor);
        }
    }

    /// Horizontal distance, in chart units, between two times.
    pub fn dx(&self, a: Ts, b: Ts) -> f64 {
        (self.x(a) - self.x(b)).abs()
    }

    /// Labels left out for want of room (`place`): the caller says so under the chart.
    pub fn unlabelled(&self) -> usize {
        self.unlabelled
    }

    /// The first of `ys` (baselines), then of the rows below the last of them down to the
    /// plot's bottom, where `text` at `x` overlaps no placed label, and remember it. None
    /// when there is no such spot: a label is left out, never printed over another.
    fn place(&mut self, x: f64, anchor: &str, text: &str, ys: &[f64]) -> Option<f64> {
        // Text width estimated at 7.4 units a character (11 px bold DejaVu Sans, the
        // widest common fallback), plus a gap; rows 14 units apart (11 px text, 3 between).
        let w = text.chars().count() as f64 * 7.4 + 6.0;
        let (x0, x1) = match anchor {
            "end" => (x - w, x),
            _ => (x, x + w),
        };
        let free = |y: f64, placed: &[(f64, f64, f64)]| {
            placed
                .iter()
                .all(|&(a, b, py)| x1 < a || x0 > b || (py - y).abs() >= ROW)
        };
        let last = ys.last().copied().unwrap_or(TOP + ROW);
        let below = (1..)
            .map(|k| last + ROW * f64::from(k))
            .take_while(|&y| y <= self.bottom() - 4.0);
        let found = ys
            .iter()
            .copied()
            .filter(|&y| y >= TOP - 4.0 && y <= self.bottom() - 4.0)
            .chain(below)
            .find(|&y| free(y, &self.placed));
        match found {
            Some(y) => self.placed.push((x0, x1, y)),
            None => self.unlabelled += 1,
        }
        found
    }

    /// A straight segment between two (time, bytes) points, clipped to the plot's time range.
    pub fn segment(&mut self, a: (Ts, f64), b: (Ts, f64), class: &str) {
        let (a, b) = match clip(a, b, self.t0, self.t1) {
            Some(s) => s,
            None => return,
        };
        let _ = write!(
            self.body,
            r#"<path class="{class}" d="M{:.1} {:.1}L{:.1} {:.1}"/>"#,
            self.x(a.0),
            self.y(a.1),
            self.x(b.0),
            self.y(b.1)
        );
    }

    pub fn label(&mut self, x: f64, y: f64, class: &str, text: &str, anchor: &str) {
        let _ = write!(
            self.labels,
            r#"<text class="lab {class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}">{}</text>"#,
            esc(text)
        );
    }

    /// A label for a point off the right edge: at the edge, under the point's height.
    pub fn label_at(&mut self, v: f64, class: &str, text: &str) {
        let x = WIDTH - RIGHT - 4.0;
        let y = self.y(v);
        if let Some(at) = self.place(x, "end", text, &[y + 14.0, y + 28.0, y - 4.0]) {
            self.label(x, at, class, text, "end");
        }
    }

    /// The finished `<svg>`: scales to the page width, titled for screen readers.
    pub fn finish(self, id: &str, title: &str) -> String {
        format!(
            r#"<svg class="chart" id="{id}" viewBox="0 0 {WIDTH} {h}" role="img" aria-label="{t}"><title>{t}</title>{b}{l}</svg>"#,
            h = self.height,
            t = esc(title),
            b = self.body,
            l = self.labels,
        )
    }
}

/// The part of segment a–b inside `[t0, t1]`.
fn clip(a: (Ts, f64), b: (Ts, f64), t0: Ts, t1: Ts) -> Option<((Ts, f64), (Ts, f64))> {
    if b.0 < t0 || a.0 > t1 || b.0 <= a.0 {
        return None;
    }
    let at = |t: Ts| a.1 + (b.1 - a.1) * (t - a.0) as f64 / (b.0 - a.0) as f64;
    let s = if a.0 < t0 { (t0, at(t0)) } else { a };
    let e = if b.0 > t1 { (t1, at(t1)) } else { b };
    Some((s, e))
}

/// A round top for the byte axis, at least 1 MiB.
fn nice_max(v: f64) -> f64 {
    let v = v.max(1048576.0) * 1.05;
    let step = byte_step(v);
    (v / step).ceil() * step
}

/// The binary unit an axis reaching `max` is labelled in.
fn axis_unit(max: f64) -> (f64, &'static str) {
    [
        (1099511627776.0, "TiB"),
        (1073741824.0, "GiB"),
        (1048576.0, "MiB"),
        (1024.0, "KiB"),
    ]
    .into_iter()
    .find(|(u, _)| max >= *u)
    .unwrap_or((1.0, "B"))
}

/// A byte step giving 3 to 6 grid lines: 1, 2, 2.5 or 5 × a power of ten of the axis unit,
/// so labels read 0, 0.5, 1.0, 1.5 GiB rather than 512 MiB, 1.00 GiB.
fn byte_step(max: f64) -> f64 {
    let raw = max / 5.0;
    let (unit, _) = axis_unit(max);
    let mut m = 0.001;
    while m < 1e6 {
        for k in [1.0, 2.0, 2.5, 5.0] {
            if k * m * unit >= raw {
                return k * m * unit;
            }
        }
        m *= 10.0;
    }
    raw.max(1.0)
}

/// `1.5 GiB`, `0`, `250 MiB`: a grid value in the axis' unit, as few decimals as it needs.
fn axis_label(v: f64, max: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let (unit, name) = axis_unit(max);
    let x = v / unit;
    let text = if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else if (x * 10.0 - (x * 10.0).round()).abs() < 1e-6 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{text} {name}")
}

/// A time step for 4 to 10 labels, and whether labels need seconds.
fn time_step(span_ms: i64) -> (i64, bool) {
    const STEPS: [i64; 18] = [
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    ];
    let s = STEPS
        .iter()
        .map(|s| s * 1000)
        .find(|s| span_ms / s <= 9)
        .unwrap_or(86_400_000 * ((span_ms / 86_400_000 / 9) + 1));
    (s, s < 60_000)
}

fn clock(t: Ts, secs: bool) -> String {
    let f = if secs { "%H:%M:%S" } else { "%H:%M" };
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
        .map(|d| d.format(f).to_string())
        .unwrap_or_default()
}

/// A free-block histogram: one bar per power-of-two size class (bytes free in it), the count
/// above each bar, and the request that failed (or the largest the run made) as a line.
pub fn histogram(
    id: &str,
    hist: &[crate::wire::HistBucket],
    request: Option<u64>,
    title: &str,
) -> Option<String> {
    let lo = hist.iter().map(|b| b.0).min()?;
    let hi = hist
        .iter()
        .map(|b| b.0)
        .max()?
        .max(request.map(|r| 63 - r.max(1).leading_zeros()).unwrap_or(0));
    let n = (hi - lo + 1) as f64;
    let (w, h, left, bottom, top) = (520.0, 190.0, 56.0, 34.0, 16.0);
    let bw = (w - left - 8.0) / n;
    let ymax = nice_max(hist.iter().map(|b| b.2).max().unwrap_or(1) as f64);
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / ymax);
    let mut bars = String::new();
    let mut text = String::new();
    // The counts' boxes (x0, x1, baseline), which the request's label keeps clear of.
    let mut counts: Vec<(f64, f64, f64)> = vec![];
    for b in hist {
        let x = left + (b.0 - lo) as f64 * bw + 1.0;
        let top_y = y(b.2 as f64);
        let _ = write!(
            bars,
            "M{x:.1} {:.1}V{top_y:.1}h{:.1}V{:.1}Z",
            h - bottom,
            bw - 2.0,
            h - bottom
        );
        let (cx, cy) = (x + bw / 2.0 - 1.0, top_y - 3.0);
        let half = b.1.to_string().len() as f64 * 3.3;
        counts.push((cx - half, cx + half, cy));
        let _ = write!(
            text,
            r#"<text class="hcount" x="{cx:.1}" y="{cy:.1}">{}</text>"#,
            b.1
        );
    }
    let label_every = ((n / 8.0).ceil() as u32).max(1);
    for k in lo..=hi {
        if (k - lo) % label_every == 0 {
            let x = left + (k - lo) as f64 * bw;
            let _ = write!(
                text,
                r#"<text class="tlab start" x="{x:.1}" y="{:.1}">{}</text>"#,
                h - bottom + 14.0,
                esc(&human(1u64 << k.min(62)))
            );
        }
    }
    let step = byte_step(ymax);
    let mut grid = String::new();
    let mut v = 0.0;
    while v <= ymax * 1.0001 {
        let _ = write!(grid, "M{left:.1} {:.1}H{:.1}", y(v), w - 8.0);
        let _ = write!(
            text,
            r#"<text class="ylab" x="{:.1}" y="{:.1}">{}</text>"#,
            left - 5.0,
            y(v) + 4.0,
            esc(&axis_label(v, ymax))
        );
        v += step;
    }
    let mut mark = String::new();
    if let Some(r) = request.filter(|r| *r > 0) {
        let x = left + (libm::log2(r as f64) - lo as f64) * bw;
        let words = format!("asked {}", human(r));
        // Left of the line, else right of it, lower down: never over a bar's count.
        let tw = words.chars().count() as f64 * 7.4;
        let mut spots = [0.0, 14.0, 28.0, 42.0]
            .into_iter()
            .flat_map(|dy| [(x - 3.0 - tw, "end", dy), (x + 3.0, "start", dy)]);
        let clear = |x0: f64, y: f64| {
            x0 >= 0.0
                && x0 + tw <= w
                && counts
                    .iter()
                    .all(|&(a, b, cy)| x0 + tw < a || x0 > b || (cy - y).abs() >= 12.0)
        };
        let (x0, anchor, dy) = spots
            .find(|&(x0, _, dy)| clear(x0, top + 8.0 + dy))
            .unwrap_or((x - 3.0 - tw, "end", 0.0));
        let tx = if anchor == "end" { x0 + tw } else { x0 };
        let _ = write!(
            mark,
            r#"<path class="oom" d="M{x:.1} {top:.1}V{:.1}"/><text class="lab oom" x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            h - bottom,
            top + 8.0 + dy,
            esc(&words)
        );
    }
    let _ = write!(
        text,
        r#"<text class="tlab unit" x="{:.1}" y="{:.1}">free-block size (bytes free per size class; count above)</text>"#,
        w - 8.0,
        h - 2.0
    );
    Some(format!(
        r#"<svg class="chart hist" id="{id}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><title>{t}</title><path class="grid" d="{grid}"/><path class="bar" d="{bars}"/>{mark}{text}</svg>"#,
        t = esc(title)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More labels at one time than the plot has rows: each placed one has a row of its
    /// own, the rest are left out and counted, none printed over another.
    #[test]
    fn labels_with_no_free_row_are_left_out_not_overprinted() {
        let mut c = Chart::new(0, 100_000, 1e9, 250.0);
        for k in 0..40 {
            c.vline(50_000, "oom", &format!("OOM · PID {k}"));
        }
        let rows: Vec<f64> = c.placed.iter().map(|p| p.2).collect();
        assert!(rows.len() >= 8, "rows used: {rows:?}");
        for (i, a) in rows.iter().enumerate() {
            assert!(
                rows[i + 1..].iter().all(|b| (a - b).abs() >= ROW),
                "{rows:?}"
            );
        }
        assert_eq!(c.unlabelled() + rows.len(), 40);
        assert_eq!(c.labels.matches("<text").count(), rows.len());
    }

    #[test]
    fn axes_are_round_and_start_at_zero() {
        assert_eq!(byte_step(100.0 * 1048576.0), 20.0 * 1048576.0);
        assert_eq!(byte_step(2.44 * 1073741824.0), 0.5 * 1073741824.0);
        assert_eq!(nice_max(3.3 * 1073741824.0), 4.0 * 1073741824.0);
        assert_eq!(
            axis_label(1.5 * 1073741824.0, 2.44 * 1073741824.0),
            "1.5 GiB"
        );
        assert_eq!(axis_label(250.0 * 1048576.0, 900.0 * 1048576.0), "250 MiB");
        assert_eq!(axis_label(0.0, 1.0), "0");
        assert_eq!(time_step(142_000), (15_000, true));
        assert_eq!(time_step(86_400_000), (3 * 3_600_000, false));
        let c = Chart::new(0, 100_000, 1e9, 200.0);
        assert!(
            (c.y(0.0) - (200.0 - BOTTOM)).abs() < 1e-9,
            "zero at the bottom"
        );
    }

    #[test]
    fn segments_are_clipped_to_the_plot() {
        let s = clip((0, 0.0), (100, 100.0), 50, 80).expect("overlaps");
        assert_eq!(s, ((50, 50.0), (80, 80.0)));
        assert!(clip((0, 0.0), (10, 1.0), 20, 30).is_none());
    }

    #[test]
    fn a_histogram_draws_a_bar_per_class_and_the_request() {
        let svg = histogram(
            "h",
            &[(20, 3, 3 << 20), (24, 1, 20 << 20)],
            Some(64 << 20),
            "t",
        )
        .expect("bars");
        assert!(svg.matches("V").count() >= 2);
        assert!(svg.contains("asked 64.0 MiB"), "{svg}");
        assert!(histogram("h", &[], None, "t").is_none());
    }
}
