//! Every piece of a screen (a border, a chart, an axis, a process row, an indicator) is
//! drawn through `Painter::paint` under a name. Normally that is a plain call; in checked
//! mode (tests) each piece is drawn into a scratch buffer first and every cell it touches
//! is claimed, so two pieces writing the same cell (text printed over text) is reported
//! with both names and the position instead of silently hiding one of them.

use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
#[cfg(test)]
use ratatui::style::Style;

/// A cell no widget draws: marks "untouched" in the scratch buffer, so writes of plain
/// spaces (padding that would erase a neighbour) count as writes too.
const UNTOUCHED: &str = "\u{E000}";

struct Checker {
    scratch: Buffer,
    /// Index into `names` + 1 of the piece owning each cell; 0 for none.
    owner: Vec<u16>,
    names: Vec<String>,
    clashes: Vec<String>,
    /// Plot areas of charts: their background is not empty space.
    plots: Vec<Rect>,
}

pub struct Painter<'a> {
    pub buf: &'a mut Buffer,
    check: Option<Box<Checker>>,
}

impl<'a> Painter<'a> {
    /// Draw straight into `buf`: what the terminal uses; costs nothing per piece.
    pub fn new(buf: &'a mut Buffer) -> Painter<'a> {
        Painter { buf, check: None }
    }

    /// Draw with overlap checking (tests): see `clashes`.
    pub fn checked(buf: &'a mut Buffer) -> Painter<'a> {
        let area = buf.area;
        let check = Checker {
            scratch: Buffer::filled(area, Cell::new(UNTOUCHED)),
            owner: vec![0; area.area() as usize],
            names: Vec::new(),
            clashes: Vec::new(),
            plots: Vec::new(),
        };
        Painter {
            buf,
            check: Some(Box::new(check)),
        }
    }

    /// Draw one named piece.
    pub fn paint<R>(&mut self, name: &str, f: impl FnOnce(&mut Buffer) -> R) {
        self.draw(name, false, f);
    }

    /// Draw a piece that covers others on purpose (the help overlay): it takes the cells
    /// it touches without a clash.
    pub fn overlay<R>(&mut self, name: &str, f: impl FnOnce(&mut Buffer) -> R) {
        self.draw(name, true, f);
    }

    /// Note the plot area of a chart (checked mode): see `empty_share`.
    pub fn plot_area(&mut self, r: Rect) {
        if let Some(c) = self.check.as_mut() {
            c.plots.push(r);
        }
    }

    /// Cells written by more than one piece, as `x,y: first / second`.
    pub fn clashes(&self) -> Vec<String> {
        self.check
            .as_ref()
            .map_or_else(Vec::new, |c| c.clashes.clone())
    }

    fn draw<R>(&mut self, name: &str, over: bool, f: impl FnOnce(&mut Buffer) -> R) {
        let Some(c) = self.check.as_mut() else {
            let _ = f(self.buf);
            return;
        };
        let blank = Cell::new(UNTOUCHED);
        for cell in c.scratch.content.iter_mut() {
            cell.clone_from(&blank);
        }
        let _ = f(&mut c.scratch);
        c.names.push(name.to_string());
        let id = c.names.len() as u16;
        let area = c.scratch.area;
        let untouched_style = blank.style();
        for (i, cell) in c.scratch.content.iter().enumerate() {
            let touched = cell.symbol() != UNTOUCHED || cell.style() != untouched_style;
            if !touched {
                continue;
            }
            let x = area.x + (i as u16 % area.width);
            let y = area.y + (i as u16 / area.width);
            let prev = c.owner[i];
            if prev != 0 && prev != id && !over && c.clashes.len() < 50 {
                c.clashes.push(format!(
                    "{x},{y}: {} / {name}",
                    c.names[usize::from(prev - 1)]
                ));
            }
            c.owner[i] = id;
            let mut out = cell.clone();
            if out.symbol() == UNTOUCHED {
                // Style-only change (a highlight): keep what is there.
                out.set_symbol(self.buf[(x, y)].symbol());
            }
            self.buf[(x, y)] = out;
        }
    }
}

impl Painter<'_> {
    /// In checked mode, the share of the screen that is empty space (see `blank_share`),
    /// not counting the background of charts: a plot's area above its curve is part of
    /// the chart (charts are scaled to their data, which other tests check).
    pub fn empty_share(&self) -> Option<f64> {
        let c = self.check.as_ref()?;
        let area = self.buf.area;
        let in_plot = |x: u16, y: u16| {
            c.plots
                .iter()
                .any(|r| r.contains(ratatui::layout::Position { x, y }))
        };
        Some(share(self.buf, area, in_plot))
    }
}

/// Share of the cells of `area` that are empty space: blank cells in runs of four or more
/// along a row. Shorter runs are the gaps between words and columns that make text
/// readable; long runs are a pane that shows nothing.
pub fn blank_share(buf: &Buffer, area: Rect) -> f64 {
    share(buf, area, |_, _| false)
}

fn share(buf: &Buffer, area: Rect, exempt: impl Fn(u16, u16) -> bool) -> f64 {
    let mut blank = 0usize;
    for y in area.top()..area.bottom() {
        let mut run = 0usize;
        for x in area.left()..=area.right() {
            let empty = x < area.right() && !exempt(x, y) && {
                let s = buf[(x, y)].symbol();
                s == " " || s == "\u{2800}" || s.is_empty()
            };
            if empty {
                run += 1;
            } else {
                if run >= 4 {
                    blank += run;
                }
                run = 0;
            }
        }
    }
    blank as f64 / area.area().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_pieces_on_one_cell_are_reported() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 2));
        let mut p = Painter::checked(&mut buf);
        p.paint("row", |b| b.set_string(0, 0, "abcdef", Style::new()));
        p.paint("badge", |b| b.set_string(8, 0, "+2", Style::new()));
        assert!(p.clashes().is_empty());
        p.paint("indicator", |b| {
            b.set_string(4, 0, "+1 below", Style::new())
        });
        let c = p.clashes();
        assert_eq!(c.first().map(String::as_str), Some("4,0: row / indicator"));
        assert_eq!(buf[(4, 0)].symbol(), "+");
    }

    #[test]
    fn overlays_and_plain_painting_do_not_report() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 1));
        let mut p = Painter::checked(&mut buf);
        p.paint("a", |b| b.set_string(0, 0, "ab", Style::new()));
        p.overlay("help", |b| b.set_string(0, 0, "??", Style::new()));
        assert!(p.clashes().is_empty());
        let mut plain = Painter::new(&mut buf);
        plain.paint("x", |b| b.set_string(0, 0, "zz", Style::new()));
        assert!(plain.clashes().is_empty());
        assert_eq!(buf[(1, 0)].symbol(), "z");
    }

    #[test]
    fn blank_share_counts_long_runs_only() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 2));
        buf.set_string(0, 0, "a b  c   d    e", Style::new());
        // Row 0: one run of 4 (between d and e) + 5 trailing; row 1: 20.
        let s = blank_share(&buf, buf.area);
        assert!((s - 29.0 / 40.0).abs() < 1e-9, "{s}");
    }
}
