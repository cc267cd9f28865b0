//! A memory chart: value axis with round ticks, the plot (braille dots written straight
//! into the buffer in Unicode, two time slots and four levels per cell; a monotonic ramp in
//! ASCII), and a wall-clock axis. Axis, plot and time row are separate pieces drawn in
//! their own cells, so labels never sit on the data.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::braille::BRAILLE;

use super::chart::{Col, Grid, Scale, time_ticks};
use super::paint::Painter;
use super::theme::Theme;

/// Width of the value axis: the longest label (`17.5 GiB`) and its tick mark.
pub(crate) const Y_AXIS: u16 = 9;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Filled from the axis floor up: the main series (memory in use).
    Area,
    /// A line over the area: allocator counters, epoch floors and peaks.
    Line,
    /// A dotted line: what is extrapolated, not measured (a forecast).
    Dotted,
}

#[derive(Clone, Copy)]
pub(crate) struct Trace<'a> {
    pub cols: &'a [Col],
    pub kind: Kind,
    pub style: Style,
    /// Its mark where colour cannot be relied on (ASCII, NO_COLOR): every line but the
    /// first series is drawn with it, so series are told apart by shape.
    pub ascii: char,
}

pub(crate) struct Plot<'a> {
    pub grid: Grid,
    pub scale: Scale,
    pub traces: Vec<Trace<'a>>,
    /// Horizontal references (the peak, the card total or allocator limit), drawn only
    /// where there is no data.
    pub refs: Vec<(f64, Style)>,
}

/// Time slots per cell: braille has two dot columns per cell.
pub(crate) fn slots_per_cell(theme: &Theme) -> usize {
    if theme.ascii { 1 } else { 2 }
}

/// Rows of dots per cell.
fn levels(theme: &Theme) -> usize {
    if theme.ascii { 8 } else { 4 }
}

/// Where the pieces of a chart go inside `area`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChartAreas {
    pub axis: Rect,
    pub plot: Rect,
    pub time: Option<Rect>,
}

/// Split `area` into value axis, plot and (when `time_row`) the wall-clock row.
pub(crate) fn split(area: Rect, time_row: bool) -> ChartAreas {
    let axis_w = if area.width >= Y_AXIS + 12 { Y_AXIS } else { 0 };
    let t = u16::from(time_row && area.height >= 3);
    let plot = Rect {
        x: area.x + axis_w,
        y: area.y,
        width: area.width - axis_w,
        height: area.height - t,
    };
    ChartAreas {
        axis: Rect {
            width: axis_w,
            height: plot.height,
            ..area
        },
        plot,
        time: (t == 1).then_some(Rect {
            y: area.y + plot.height,
            height: 1,
            ..area
        }),
    }
}

/// Draw the chart as three pieces: `axis`, `plot`, `time`.
/// `zoom`: the zoom window's label (`5m`), shown under the value axis; the time axis itself
/// may span less (only the history there is).
pub(crate) fn render(p: &mut Painter, a: &ChartAreas, plot: &Plot, zoom: &str, theme: &Theme) {
    if a.plot.width == 0 || a.plot.height == 0 {
        return;
    }
    if a.axis.width > 0 {
        p.paint("value axis", |buf| {
            value_axis(buf, a.axis, &plot.scale, theme)
        });
    }
    p.plot_area(a.plot);
    p.paint("plot", |buf| {
        if theme.ascii {
            ascii_plot(buf, a.plot, plot, theme);
        } else if theme.color || plot.traces.len() < 2 {
            braille_plot(buf, a.plot, plot, theme);
        } else {
            // Without colour, braille lines all look alike: the first series stays braille,
            // the others are drawn with their letters over it (`legend_mark` says which).
            let first = Plot {
                grid: plot.grid,
                scale: plot.scale,
                traces: plot.traces[..1].to_vec(),
                refs: plot.refs.clone(),
            };
            braille_plot(buf, a.plot, &first, theme);
            for t in &plot.traces[1..] {
                if t.fine() {
                    block_line(buf, a.plot, t, &plot.scale, 2);
                } else {
                    glyph_line(buf, a.plot, t, &plot.scale, 2);
                }
            }
        }
        mark_gaps(buf, a.plot, plot, theme);
    });
    if let Some(t) = a.time {
        p.paint("time axis", |buf| {
            time_axis(buf, t, a.axis.width, &plot.grid, theme)
        });
        let label = format!("zoom {zoom}");
        if a.axis.width > 1 && label.len() < usize::from(a.axis.width) {
            let w = usize::from(a.axis.width - 1);
            p.paint("zoom", |buf| {
                super::put::string(buf, t.x, t.y, format!("{label:>w$}"), theme.dim())
            });
        }
    }
}

/// Row of `area` that holds value fraction `f` (0 bottom, 1 top).
fn row_of(f: f64, rows: u16) -> u16 {
    let from_bottom = (f * f64::from(rows) - 1e-9)
        .floor()
        .clamp(0.0, f64::from(rows - 1));
    rows - 1 - from_bottom as u16
}

fn value_axis(buf: &mut Buffer, area: Rect, s: &Scale, theme: &Theme) {
    let (line, tick) = if theme.ascii {
        ('|', '+')
    } else {
        ('│', '┤')
    };
    for y in area.top()..area.bottom() {
        buf[(area.right() - 1, y)]
            .set_char(line)
            .set_style(theme.dim());
    }
    let mut used = vec![false; usize::from(area.height)];
    // Top first: the highest tick names the scale and must not be skipped.
    let ticks: Vec<f64> = s.ticks().collect();
    for v in ticks.into_iter().rev() {
        let r = row_of(s.frac(v), area.height);
        if used[usize::from(r)] {
            continue;
        }
        used[usize::from(r)] = true;
        let w = usize::from(area.width - 1);
        let label = s.label_in(v, w);
        let text = format!("{label:>w$}");
        super::put::stringn(buf, area.x, area.y + r, text, w, theme.dim());
        buf[(area.right() - 1, area.y + r)].set_char(tick);
    }
}

/// An area says "this much from zero"; on an axis that does not start at zero (a fitted
/// band around a slow leak) the same series is drawn as a line instead.
fn drawn_as(kind: Kind, s: &Scale) -> Kind {
    if s.lo > 0.0 && kind == Kind::Area {
        Kind::Line
    } else {
        kind
    }
}

/// Dot height (in `levels` per row) of value `v`; anything above the floor shows.
fn dots(v: f64, s: &Scale, h: usize) -> usize {
    let d = (s.frac(v) * h as f64).round() as usize;
    if v > s.lo && d == 0 { 1 } else { d.min(h) }
}

fn fg(style: Style, color: bool) -> Color {
    if color {
        style.fg.unwrap_or(Color::Reset)
    } else {
        Color::Reset
    }
}

/// Braille dots of a plot, two columns and four rows of dots per cell, each cell with the
/// colour of the last dot set in it: what ratatui's `Canvas` with its braille marker makes
/// of the same dots, written straight into the buffer. The canvas cost a redraw more than
/// the rest of a chart (a boxed grid, a layer copied out of it, a painter per shape); this
/// is a pass over the dots and one over the cells.
struct Dots {
    /// Cells per row.
    width: usize,
    cells: Vec<(u8, Color)>,
}

impl Dots {
    fn new(width: usize, height: usize) -> Dots {
        Dots {
            width,
            cells: vec![(0, Color::Reset); width * height],
        }
    }

    /// Set the dot at column `x`, row `y` (in dots, from the top left).
    fn paint(&mut self, x: usize, y: usize, c: Color) {
        if let Some(cell) = self.cells.get_mut(y / 4 * self.width + x / 2) {
            cell.0 |= 1u8 << (x % 2 + 2 * (y % 4));
            cell.1 = c;
        }
    }

    /// `paint` of the dots of column `x` from row `from` to before row `to`, a cell at a
    /// time: an area under a full card is every dot of its plot, and dot by dot it was
    /// most of a chart's cost (callgrind).
    fn paint_run(&mut self, x: usize, from: usize, to: usize, c: Color) {
        // The bits of column `x % 2` in a cell: dot row r is bit 2r + x % 2.
        let column = 0x55u8 << (x % 2);
        let mut y = from;
        while y < to {
            let top = y / 4 * 4;
            let end = to.min(top + 4);
            // Bits 2(y - top) up to 2(end - top): the rows of this cell in the run.
            let rows = ((1u16 << (2 * (end - top))) - (1u16 << (2 * (y - top)))) as u8;
            if let Some(cell) = self.cells.get_mut(top / 4 * self.width + x / 2) {
                cell.0 |= rows & column;
                cell.1 = c;
            }
            y = end;
        }
    }
}

fn braille_dots(plot: &Plot, w: usize, h: usize, color: bool) -> Dots {
    let mut painter = Dots::new(w / 2, h / 4);
    let s = &plot.scale;
    for (v, style) in &plot.refs {
        if *v > s.hi || *v < s.lo {
            continue;
        }
        let y = h - dots(*v, s, h).max(1);
        for x in (0..w).step_by(2) {
            painter.paint(x, y, fg(*style, color));
        }
    }
    for t in &plot.traces {
        let c = fg(t.style, color);
        let kind = drawn_as(t.kind, s);
        let mut prev: Option<usize> = None;
        for (x, col) in t.cols.iter().enumerate().take(w) {
            let Some(v) = col.val() else {
                prev = None;
                continue;
            };
            let d = dots(v, s, h);
            match kind {
                // Zero is data too: a dot on the floor, unlike a slot with no data.
                Kind::Area => painter.paint_run(x, h - d.max(1), h, c),
                Kind::Dotted => {
                    if x % 2 == 0 {
                        painter.paint(x, h - d.max(1), c);
                    }
                }
                Kind::Line => {
                    let d = d.max(1);
                    // Join steps with a vertical run so the line stays continuous.
                    let (a, b) = match prev {
                        Some(p) => (p.min(d), p.max(d)),
                        None => (d, d),
                    };
                    // Heights a..=b (a >= 1): the dots h - b ..= h - a.
                    painter.paint_run(x, h - b, h - a + 1, c);
                    prev = Some(d);
                }
            }
        }
    }
    painter
}

fn braille_plot(buf: &mut Buffer, area: Rect, plot: &Plot, theme: &Theme) {
    let area = buf.area.intersection(area);
    if area.is_empty() {
        return;
    }
    let dots = braille_dots(
        plot,
        usize::from(area.width) * 2,
        usize::from(area.height) * 4,
        theme.color,
    );
    // As the canvas: its background (the default) on every cell, then each cell with a dot
    // gets its braille character and the colour of its last dot.
    for (row, y) in (area.top()..area.bottom()).enumerate() {
        let line = &dots.cells[row * dots.width..(row + 1) * dots.width];
        let start = buf.index_of(area.x, y);
        let cells = &mut buf.content[start..start + dots.width];
        for (&(pattern, c), cell) in line.iter().zip(cells) {
            cell.bg = Color::Reset;
            if pattern != 0 {
                cell.set_char(BRAILLE[usize::from(pattern)]).fg = c;
            }
        }
    }
}

/// Per cell, the highest value of its `k` slots (a spike in either half of a braille cell
/// survives, as in the braille plot).
fn per_cell<'a>(cols: &'a [Col], k: usize, width: u16) -> impl Iterator<Item = (u16, f64)> + 'a {
    cols.chunks(k.max(1))
        .enumerate()
        .take(usize::from(width))
        .filter_map(|(i, c)| {
            let v = c.iter().filter_map(|c| c.val()).reduce(f64::max)?;
            Some((i as u16, v))
        })
}

/// A line as its mark in each cell, at the row its value falls in (eight levels per row);
/// `k` slots per cell.
fn glyph_line(buf: &mut Buffer, area: Rect, t: &Trace, s: &Scale, k: usize) {
    let h = usize::from(area.height) * 8;
    let bottom = area.bottom() - 1;
    for (i, v) in per_cell(t.cols, k, area.width) {
        if t.kind == Kind::Dotted && i % 2 == 1 {
            continue;
        }
        let r = ((dots(v, s, h).max(1) - 1) / 8) as u16;
        buf[(area.x + i, bottom - r.min(area.height - 1))]
            .set_char(t.ascii)
            .set_style(t.style);
    }
}

/// Without colour (Unicode), the per-epoch floor as eighth blocks at its level: a leak of
/// a few MiB per epoch rises through the levels of one row instead of staying one letter
/// on one row.
fn block_line(buf: &mut Buffer, area: Rect, t: &Trace, s: &Scale, k: usize) {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let h = usize::from(area.height) * 8;
    let bottom = area.bottom() - 1;
    for (i, v) in per_cell(t.cols, k, area.width) {
        let d = dots(v, s, h).max(1) - 1;
        let r = ((d / 8) as u16).min(area.height - 1);
        buf[(area.x + i, bottom - r)]
            .set_char(BLOCKS[d % 8])
            .set_style(t.style);
    }
}

impl Trace<'_> {
    /// The per-epoch floor (`f`): what a leak moves, drawn finer than the other lines
    /// where colour cannot tell it apart.
    pub(crate) fn fine(&self) -> bool {
        self.ascii == 'f'
    }
}

/// How a legend shows a series: the glyph the plot draws it with.
pub(crate) fn legend_mark(t: &Trace, first: bool, theme: &Theme) -> String {
    match (theme.ascii, theme.color, first, t.kind) {
        (true, ..) => t.ascii.to_string(),
        (false, _, _, Kind::Area) => "█".into(),
        (false, false, false, _) if t.fine() => "▄".into(),
        (false, false, false, _) => t.ascii.to_string(),
        (false, _, _, Kind::Dotted) => "┈".into(),
        (false, false, true, _) => "⠒".into(),
        (false, true, ..) => "━".into(),
    }
}

fn ascii_plot(buf: &mut Buffer, area: Rect, plot: &Plot, theme: &Theme) {
    let h = usize::from(area.height) * levels(theme);
    let s = &plot.scale;
    let bottom = area.bottom() - 1;
    for t in &plot.traces {
        if drawn_as(t.kind, s) != Kind::Area {
            glyph_line(buf, area, t, s, 1);
            continue;
        }
        for (i, col) in t.cols.iter().enumerate().take(usize::from(area.width)) {
            let Some(v) = col.val() else { continue };
            let x = area.x + i as u16;
            let d = dots(v, s, h);
            for r in 0..area.height {
                let level = d as f64 / 8.0 - f64::from(r);
                if level <= 0.0 {
                    break;
                }
                let ch = theme.bar(level.min(1.0));
                if ch != ' ' {
                    buf[(x, bottom - r)].set_char(ch).set_style(t.style);
                }
            }
        }
    }
    for (v, style) in &plot.refs {
        if *v > s.hi || *v < s.lo {
            continue;
        }
        let y = area.y + row_of(s.frac(*v), area.height);
        for x in area.left()..area.right() {
            if buf[(x, y)].symbol() == " " {
                buf[(x, y)].set_char(theme.dashed()).set_style(*style);
            }
        }
    }
}

/// A cell whose every slot failed shows the gap mark on the floor (no data drawn there).
fn mark_gaps(buf: &mut Buffer, area: Rect, plot: &Plot, theme: &Theme) {
    let Some(main) = plot.traces.first() else {
        return;
    };
    let k = slots_per_cell(theme);
    for (i, cell) in main
        .cols
        .chunks(k)
        .enumerate()
        .take(usize::from(area.width))
    {
        if cell.iter().all(|c| *c == Col::Gap) {
            buf[(area.x + i as u16, area.bottom() - 1)]
                .set_char(theme.gap())
                .set_style(theme.dim());
        }
    }
}

fn time_axis(buf: &mut Buffer, area: Rect, axis_w: u16, g: &Grid, theme: &Theme) {
    let (line, tick, corner) = if theme.ascii {
        ('-', '+', '+')
    } else {
        ('─', '┴', '└')
    };
    let plot_x = area.x + axis_w;
    let cells = area.width - axis_w;
    if axis_w > 0 {
        buf[(plot_x - 1, area.y)]
            .set_char(corner)
            .set_style(theme.dim());
    }
    for x in plot_x..area.right() {
        buf[(x, area.y)].set_char(line).set_style(theme.dim());
    }
    // Seconds while ticks are under a minute apart, minutes under a day, then dates: the
    // spacing is found for the label it will carry.
    let need = |every: i64| match every {
        e if e < 60_000 => 8,
        e if e < 86_400_000 => 5,
        _ => 6,
    };
    let (mut every, mut ticks) = time_ticks(g, cells, 9);
    if need(every) < 8 {
        let (e, t) = time_ticks(g, cells, need(every) + 1);
        if need(e) <= need(every) {
            (every, ticks) = (e, t);
        }
    }
    for (col, t) in ticks {
        let text = match every {
            e if e < 60_000 => theme.clock(t),
            e if e < 86_400_000 => theme.clock(t).chars().take(5).collect(),
            _ => theme.day(t),
        };
        let text = text.as_str();
        let x = plot_x + col;
        if x + 1 + text.len() as u16 > area.right() {
            continue;
        }
        buf[(x, area.y)].set_char(tick).set_style(theme.dim());
        super::put::string(buf, x + 1, area.y, text, theme.dim());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_sets_the_dots_and_colours_that_painting_each_dot_sets() {
        for (w, h) in [(3, 2), (4, 5)] {
            for x in 0..2 * w {
                for from in 0..=4 * h + 1 {
                    for to in from..=4 * h + 2 {
                        let (mut each, mut run) = (Dots::new(w, h), Dots::new(w, h));
                        for d in [&mut each, &mut run] {
                            d.paint(1, 0, Color::Blue);
                        }
                        for y in from..to {
                            each.paint(x, y, Color::Red);
                        }
                        run.paint_run(x, from, to, Color::Red);
                        assert_eq!(run.cells, each.cells, "x {x} rows {from}..{to} in {w}x{h}");
                    }
                }
            }
        }
    }
}
