//! The terminal as gpumon draws on it: one buffer a frame is drawn into, and a small record of
//! what each cell of the terminal shows, so only the cells that changed are sent.
//!
//! ratatui's `Terminal` keeps two whole buffers (40 bytes a cell: 2 x 192 kB at 120x40, plus
//! a list of every changed cell, 115 kB on a full repaint) and compares each cell of one with
//! the other on every frame: `Cell::eq`, which decodes both symbols, and the unicode width of
//! both cells, before it knows a cell is unchanged. That was a quarter of the instructions of
//! a live redraw (callgrind of `bench/draw.rs`). Here a cell shown is 20 bytes (its
//! character as an integer, its colors and modifiers), the comparison is of those, and the
//! width is known at once for the one-cell symbols that fill a screen (`put::one_cell`).
//!
//! What reaches the terminal is the same as with ratatui for a screen of single-codepoint
//! symbols (tests below compare the cells each sends). Wide characters are handled more
//! plainly: the cells a wide character covers are marked unknown, so whatever is drawn there
//! once it is gone is sent again, whatever the terminal did with them; a symbol of several
//! codepoints (a combining accent, an emoji sequence) is sent on every frame rather than
//! compared.

use ratatui::backend::{Backend, ClearType};
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

use crate::tui::ui::put::{one_cell, one_cell_code};

/// What one cell of the terminal shows, as far as gpumon knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Shown {
    /// The character; `UNKNOWN` when the terminal may show anything there (never sent, under
    /// a wide character, or left to another program by a skip cell), `SEVERAL` for a symbol
    /// of more than one codepoint (never equal: sent every time).
    sym: u32,
    fg: Color,
    bg: Color,
    underline: Color,
    modifier: Modifier,
}

const UNKNOWN: u32 = u32::MAX;
const SEVERAL: u32 = u32::MAX - 1;

impl Shown {
    const UNKNOWN: Shown = Shown {
        sym: UNKNOWN,
        fg: Color::Reset,
        bg: Color::Reset,
        underline: Color::Reset,
        modifier: Modifier::empty(),
    };

    fn of(cell: &Cell, sym: u32) -> Shown {
        Shown {
            sym,
            fg: cell.fg,
            bg: cell.bg,
            underline: cell.underline_color,
            modifier: cell.modifier,
        }
    }

    /// Whether the terminal shows `cell`, whose symbol is `sym`: asked of every cell of
    /// every frame, so field by field, cheapest first, and no record made.
    #[inline(always)]
    fn shows(&self, cell: &Cell, sym: u32) -> bool {
        self.sym == sym
            && self.fg == cell.fg
            && self.bg == cell.bg
            && self.modifier == cell.modifier
            && self.underline == cell.underline_color
    }

    fn blank() -> Shown {
        Shown::of(&Cell::EMPTY, u32::from(b' '))
    }
}

/// A cell's symbol as one integer, and how many columns it takes.
#[inline(always)]
fn symbol(cell: &Cell) -> (u32, usize) {
    match cell.symbol().as_bytes() {
        // The common case, a screen of ASCII: no decoding, no width table.
        &[b] => (u32::from(b), 1),
        _ => other_symbol(cell),
    }
}

/// Any other symbol: one character of the screens' own (a chart's braille, a border) is one
/// cell without a look in the width table.
fn other_symbol(cell: &Cell) -> (u32, usize) {
    let s = cell.symbol();
    // One character of three bytes (braille, box drawing, arrows: a chart's cells), decoded
    // here: `chars()` and its checks cost 59 instructions a cell (callgrind). A
    // `&str` of three bytes that starts with a three-byte lead is that one character.
    if let &[b0 @ 0xE0..=0xEF, b1, b2] = s.as_bytes() {
        let c = u32::from(b0 & 0x0F) << 12 | u32::from(b1 & 0x3F) << 6 | u32::from(b2 & 0x3F);
        if one_cell_code(c) {
            return (c, 1);
        }
    }
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if one_cell(c) => (u32::from(c), 1),
        (Some(c), None) => (u32::from(c), usize::from(s.cell_width())),
        _ => (SEVERAL, usize::from(s.cell_width())),
    }
}

#[allow(deprecated)] // `Cell::skip` still means skip to ratatui's own diff: the same here.
fn is_skip(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip)
        || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

pub struct Screen<B: Backend> {
    backend: B,
    buf: Buffer,
    shown: Vec<Shown>,
    /// A size that is never asked of the backend (benchmarks drawing to nowhere).
    fixed: Option<Rect>,
}

impl<B: Backend> Screen<B> {
    /// Nothing is drawn or asked until the first `draw`.
    pub fn new(backend: B) -> Self {
        Screen {
            backend,
            buf: Buffer::empty(Rect::ZERO),
            shown: Vec::new(),
            fixed: None,
        }
    }

    /// A screen of this size, whatever the backend says (ratatui's `Viewport::Fixed`).
    pub fn fixed(backend: B, width: u16, height: u16) -> Self {
        Screen {
            fixed: Some(Rect::new(0, 0, width, height)),
            ..Screen::new(backend)
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Draw a frame: `render` fills a blank buffer the size of the terminal, and the cells
    /// that differ from what the terminal shows are sent, then flushed. A new size clears the
    /// terminal first (as ratatui's `Terminal` does on a resize).
    pub fn draw(&mut self, render: impl FnOnce(&mut Buffer)) -> Result<(), B::Error> {
        let area = match self.fixed {
            Some(a) => a,
            None => {
                let size = self.backend.size()?;
                Rect::new(0, 0, size.width, size.height)
            }
        };
        if area != self.buf.area {
            self.buf.resize(area);
            self.repaint_all()?;
        }
        self.buf.reset();
        render(&mut self.buf);
        let changes = Changes {
            cells: &self.buf.content,
            shown: &mut self.shown,
            width: usize::from(area.width.max(1)),
            i: 0,
        };
        self.backend.draw(changes)?;
        self.backend.hide_cursor()?;
        self.backend.flush()
    }

    /// Clear the terminal and take it as blank, so the next draw sends every cell that is not
    /// blank: after a resize, or when another program had the screen.
    pub fn repaint_all(&mut self) -> Result<(), B::Error> {
        self.backend.clear_region(ClearType::All)?;
        self.shown.clear();
        self.shown.resize(self.buf.content.len(), Shown::blank());
        Ok(())
    }
}

/// The cells of a frame that the terminal does not show yet, in order, each recorded as shown
/// once it is handed out.
struct Changes<'a> {
    cells: &'a [Cell],
    shown: &'a mut [Shown],
    width: usize,
    i: usize,
}

impl<'a> Iterator for Changes<'a> {
    type Item = (u16, u16, &'a Cell);

    fn next(&mut self) -> Option<Self::Item> {
        while self.i < self.cells.len() {
            let i = self.i;
            let cell = &self.cells[i];
            self.i += 1;
            // Nearly every cell: a one-cell symbol with no diff option (so not a skip), which
            // the terminal already shows. Only a cell that fails this is looked at further.
            #[allow(deprecated)]
            if matches!(cell.diff_option, CellDiffOption::None) && !cell.skip {
                let (sym, width) = symbol(cell);
                if width == 1 && sym != SEVERAL && self.shown[i].shows(cell, sym) {
                    continue;
                }
            }
            if is_skip(cell) {
                self.shown[i] = Shown::UNKNOWN;
                continue;
            }
            let (sym, width) = symbol(cell);
            let width = match cell.diff_option {
                CellDiffOption::ForcedWidth(w) => usize::from(w.get()),
                _ => width.max(1),
            };
            if width > 1 && !cell.symbol().contains('\u{FE0F}') {
                // The terminal draws the character over the next cells of its row: what they
                // show is its own business until something is drawn there again. (A symbol
                // with the emoji variation selector is drawn one column wide by some
                // terminals: ratatui then also sends the cells after it, and so does this, by
                // comparing them as usual.)
                let row_end = (i / self.width + 1) * self.width;
                let end = (i + width).min(row_end).min(self.cells.len());
                for s in &mut self.shown[i + 1..end] {
                    *s = Shown::UNKNOWN;
                }
                self.i = end;
            }
            let send = !self.shown[i].shows(cell, sym)
                || sym == SEVERAL
                || matches!(cell.diff_option, CellDiffOption::AlwaysUpdate);
            if send {
                self.shown[i] = Shown::of(cell, sym);
                let x = (i % self.width) as u16;
                let y = (i / self.width) as u16;
                return Some((x, y, cell));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::{TestBackend, WindowSize};
    use ratatui::layout::{Position, Size};
    use ratatui::style::Style;
    use std::convert::Infallible;

    /// A terminal as xterm keeps one: a wide character takes the cell to its right, and
    /// writing over either half of one blanks the other. Every cell sent is recorded.
    struct Term {
        size: Size,
        /// What each cell shows; `None`: the right half of a wide character.
        cells: Vec<Option<Look>>,
        sent: Vec<(u16, u16)>,
        clears: usize,
    }

    type Look = (String, Color, Color, Color, Modifier);

    fn look(c: &Cell) -> Look {
        let s = c.symbol().to_string();
        (s, c.fg, c.bg, c.underline_color, c.modifier)
    }

    /// Columns this terminal gives a symbol. It is one of those that draw an emoji with the
    /// variation selector one column wide: the case for which cells after a wide symbol
    /// are sent at all (for the others, what matters is that they are not).
    fn columns(c: &Cell) -> usize {
        if c.symbol().contains('\u{FE0F}') {
            1
        } else {
            usize::from(c.symbol().cell_width()).max(1)
        }
    }

    impl Term {
        fn new(w: u16, h: u16) -> Term {
            Term {
                size: Size::new(w, h),
                cells: vec![Some(look(&Cell::EMPTY)); usize::from(w) * usize::from(h)],
                sent: Vec::new(),
                clears: 0,
            }
        }

        fn blank(&mut self, i: usize) {
            self.cells[i] = Some(look(&Cell::EMPTY));
        }

        fn put(&mut self, x: u16, y: u16, c: &Cell) {
            let w = usize::from(self.size.width);
            let i = usize::from(y) * w + usize::from(x);
            let row_end = (i / w + 1) * w;
            let width = columns(c);
            // Over the right half of a wide character: its left half goes.
            if self.cells[i].is_none() && i % w > 0 {
                self.blank(i - 1);
            }
            for j in i..(i + width).min(row_end) {
                // Over the left half of a wide character that is not this one: its right half goes.
                if j + 1 < row_end && self.cells[j + 1].is_none() && j + 1 >= i + width {
                    self.blank(j + 1);
                }
            }
            self.cells[i] = Some(look(c));
            for j in i + 1..(i + width).min(row_end) {
                self.cells[j] = None;
            }
        }

        /// What the terminal shows differs from `buf` at these cells (skip cells excepted).
        fn differs(&self, buf: &Buffer) -> Vec<(usize, String)> {
            let mut out = Vec::new();
            let mut covered = 0;
            for (i, c) in buf.content.iter().enumerate() {
                if covered > 0 {
                    covered -= 1;
                    if self.cells[i].is_some() {
                        out.push((i, "not covered".into()));
                    }
                    continue;
                }
                if is_skip(c) {
                    // Another program's cell: what it shows, and what it covers, is unknown.
                    continue;
                }
                covered = columns(c) - 1;
                let want = Some(look(c));
                if self.cells[i] != want {
                    out.push((i, format!("{:?} want {:?}", self.cells[i], want)));
                }
            }
            out
        }
    }

    impl Backend for Term {
        type Error = Infallible;
        fn draw<'a, I>(&mut self, content: I) -> Result<(), Infallible>
        where
            I: Iterator<Item = (u16, u16, &'a Cell)>,
        {
            for (x, y, c) in content {
                self.sent.push((x, y));
                self.put(x, y, c);
            }
            Ok(())
        }
        fn hide_cursor(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
        fn show_cursor(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
        fn get_cursor_position(&mut self) -> Result<Position, Infallible> {
            Ok(Position::ORIGIN)
        }
        fn set_cursor_position<P: Into<Position>>(&mut self, _: P) -> Result<(), Infallible> {
            Ok(())
        }
        fn clear(&mut self) -> Result<(), Infallible> {
            self.clears += 1;
            for i in 0..self.cells.len() {
                self.blank(i);
            }
            Ok(())
        }
        fn clear_region(&mut self, t: ClearType) -> Result<(), Infallible> {
            assert!(matches!(t, ClearType::All), "only whole clears are used");
            self.clear()
        }
        fn size(&self) -> Result<Size, Infallible> {
            Ok(self.size)
        }
        fn window_size(&mut self) -> Result<WindowSize, Infallible> {
            Ok(WindowSize {
                columns_rows: self.size,
                pixels: Size::new(0, 0),
            })
        }
        fn flush(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    use crate::tui::xorshift::Rng;

    const COLORS: [Color; 5] = [
        Color::Reset,
        Color::Red,
        Color::Indexed(33),
        Color::Rgb(1, 2, 3),
        Color::Rgb(1, 2, 4),
    ];

    /// A frame made as the screens make them: runs of text set with `set_stringn`, which
    /// lays wide characters out as ratatui does.
    fn frame(rng: &mut Rng, buf: &mut Buffer, symbols: &[&str], skips: bool) {
        let area = buf.area;
        for _ in 0..rng.next() % 12 {
            let x = (rng.next() % u64::from(area.width)) as u16;
            let y = (rng.next() % u64::from(area.height)) as u16;
            let text: String = (0..1 + rng.next() % 6).map(|_| rng.pick(symbols)).collect();
            let mut style = Style::new().fg(rng.pick(&COLORS)).bg(rng.pick(&COLORS));
            if rng.next().is_multiple_of(4) {
                style = style.add_modifier(Modifier::BOLD);
            }
            if rng.next().is_multiple_of(5) {
                style = style.underline_color(rng.pick(&COLORS));
            }
            buf.set_stringn(x, y, &text, usize::from(area.width - x), style);
        }
        if skips && rng.next().is_multiple_of(3) {
            let i = (rng.next() % buf.content.len() as u64) as usize;
            buf.content[i].set_diff_option(CellDiffOption::Skip);
        }
    }

    #[test]
    fn a_screen_of_single_codepoints_sends_exactly_what_ratatui_sends() {
        let symbols = ["a", "b", " ", "─", "⣿", "é", "x"];
        for seed in 1..=60 {
            let mut rng = Rng(seed);
            let mut ours = Screen::new(Term::new(17, 5));
            let mut theirs = ratatui::Terminal::new(Term::new(17, 5)).expect("terminal");
            for n in 0..30 {
                let mut want = Buffer::empty(Rect::new(0, 0, 17, 5));
                frame(&mut rng, &mut want, &symbols, false);
                ours.draw(|b| b.clone_from(&want)).expect("draw");
                theirs
                    .draw(|f| f.buffer_mut().clone_from(&want))
                    .expect("draw");
                assert_eq!(
                    ours.backend().sent,
                    theirs.backend().sent,
                    "seed {seed}, frame {n}"
                );
                assert!(ours.backend().differs(&want).is_empty());
            }
        }
    }

    #[test]
    fn the_terminal_shows_every_frame_with_wide_and_combined_symbols_and_skips() {
        // CJK, an emoji, an emoji with the variation selector, an accent made of two
        // codepoints, and a flag (two regional indicators).
        let symbols = [
            "a",
            " ",
            "世",
            "界",
            "😀",
            "❤\u{FE0F}",
            "e\u{301}",
            "🇫🇷",
            "⣿",
        ];
        for seed in 1..=80 {
            let mut rng = Rng(seed);
            let (mut w, mut h) = (13, 4);
            let mut s = Screen::new(Term::new(w, h));
            for n in 0..40 {
                if rng.next().is_multiple_of(15) {
                    // A resize: the terminal keeps nothing it showed.
                    (w, h) = (5 + (rng.next() % 12) as u16, 1 + (rng.next() % 5) as u16);
                    *s.backend_mut() = Term::new(w, h);
                }
                let mut want = Buffer::empty(Rect::new(0, 0, w, h));
                frame(&mut rng, &mut want, &symbols, true);
                s.draw(|b| b.clone_from(&want)).expect("draw");
                let wrong = s.backend().differs(&want);
                assert!(wrong.is_empty(), "seed {seed}, frame {n}: {wrong:?}");
            }
        }
    }

    #[test]
    fn an_unchanged_frame_sends_nothing_but_several_codepoint_symbols() {
        let mut s = Screen::new(Term::new(10, 2));
        let mut want = Buffer::empty(Rect::new(0, 0, 10, 2));
        want.set_string(0, 0, "ab世c", Style::new().fg(Color::Red));
        want.set_string(0, 1, "e\u{301}z", Style::new());
        s.draw(|b| b.clone_from(&want)).expect("draw");
        assert_eq!(s.backend().clears, 1, "the first frame clears the terminal");
        assert_eq!(
            s.backend().sent,
            [(0, 0), (1, 0), (2, 0), (4, 0), (0, 1), (1, 1)]
        );
        s.backend_mut().sent.clear();
        s.draw(|b| b.clone_from(&want)).expect("draw");
        assert_eq!(s.backend().sent, [(0, 1)], "only the combined accent again");
        assert_eq!(s.backend().clears, 1);
    }

    #[test]
    fn repaint_all_clears_and_sends_every_cell_that_is_not_blank() {
        let mut s = Screen::new(Term::new(6, 1));
        let mut want = Buffer::empty(Rect::new(0, 0, 6, 1));
        want.set_string(1, 0, "ok", Style::new());
        s.draw(|b| b.clone_from(&want)).expect("draw");
        // Another program wrote over the screen.
        s.backend_mut().put(1, 0, &Cell::new("z"));
        s.backend_mut().sent.clear();
        s.repaint_all().expect("repaint");
        s.draw(|b| b.clone_from(&want)).expect("draw");
        assert_eq!(s.backend().sent, [(1, 0), (2, 0)]);
        assert!(s.backend().differs(&want).is_empty());
    }

    #[test]
    fn a_shown_cell_is_20_bytes() {
        // Against ratatui's 40-byte cell, twice: the point of this module.
        assert_eq!(std::mem::size_of::<Shown>(), 20);
        assert!(std::mem::size_of::<Cell>() >= 40);
        let _ = TestBackend::new(1, 1);
    }
}
