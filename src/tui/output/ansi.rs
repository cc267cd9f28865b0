//! The cells of a frame as bytes for the terminal: exactly what ratatui's crossterm backend
//! sends, without its formatting machinery.
//!
//! crossterm writes each cell through `core::fmt`: `Print` is `write!("{}")` of the symbol,
//! every cursor move and colour a format string, each piece passed through an adapter to the
//! writer. On a live 120x40 screen that was a fifth of the main thread's instructions at 1 s
//! (callgrind). Here the same bytes are copied or their digits written into the writer. The
//! tests hold every sequence to crossterm's output for random frames, so the terminal sees
//! no difference; everything but `draw` is crossterm's own.

use std::io::{self, Write};

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};

pub struct Direct<W: Write> {
    inner: CrosstermBackend<W>,
    /// crossterm writes no colour codes at all (`\x1b[;m`, `\x1b[m`) when `NO_COLOR` is set;
    /// kept, so the bytes stay crossterm's there too.
    colors: bool,
}

impl<W: Write> Direct<W> {
    pub fn new(writer: W) -> Self {
        Direct {
            inner: CrosstermBackend::new(writer),
            colors: !crossterm::style::Colored::ansi_color_disabled_memoized(),
        }
    }
}

/// Where the previous cell's attributes left the terminal, as crossterm's `draw` tracks it.
struct Pen {
    fg: Color,
    bg: Color,
    underline: Color,
    modifier: Modifier,
    last: Option<(u16, u16)>,
}

/// Write `cells` as ratatui's `CrosstermBackend::draw` does.
fn encode<'a, W: Write>(
    w: &mut W,
    cells: impl Iterator<Item = (u16, u16, &'a Cell)>,
    colors: bool,
) -> io::Result<()> {
    let mut pen = Pen {
        fg: Color::Reset,
        bg: Color::Reset,
        underline: Color::Reset,
        modifier: Modifier::empty(),
        last: None,
    };
    for (x, y, cell) in cells {
        if !matches!(pen.last, Some((px, py)) if px.checked_add(1) == Some(x) && py == y) {
            let mut seq = Seq::new();
            seq.num(y.saturating_add(1));
            seq.byte(b';');
            seq.num(x.saturating_add(1));
            seq.byte(b'H');
            w.write_all(seq.bytes())?;
        }
        pen.last = Some((x, y));
        if cell.modifier != pen.modifier {
            modifiers(w, pen.modifier, cell.modifier)?;
            pen.modifier = cell.modifier;
        }
        if cell.fg != pen.fg || cell.bg != pen.bg {
            let mut seq = Seq::new();
            seq.color(Layer::Fore, cell.fg, colors);
            seq.byte(b';');
            seq.color(Layer::Back, cell.bg, colors);
            seq.byte(b'm');
            w.write_all(seq.bytes())?;
            pen.fg = cell.fg;
            pen.bg = cell.bg;
        }
        if cell.underline_color != pen.underline {
            let mut seq = Seq::new();
            seq.color(Layer::Under, cell.underline_color, colors);
            seq.byte(b'm');
            w.write_all(seq.bytes())?;
            pen.underline = cell.underline_color;
        }
        w.write_all(cell.symbol().as_bytes())?;
    }
    for layer in [Layer::Fore, Layer::Back, Layer::Under] {
        let mut seq = Seq::new();
        seq.color(layer, Color::Reset, colors);
        seq.byte(b'm');
        w.write_all(seq.bytes())?;
    }
    w.write_all(b"\x1b[0m")
}

/// ratatui's `ModifierDiff::queue`: what was removed first (bold and dim share one reset and
/// the survivor is set again), then what was added, each as its own sequence.
fn modifiers<W: Write>(w: &mut W, from: Modifier, to: Modifier) -> io::Result<()> {
    let removed = from - to;
    let mut sgr = |code: &[u8]| {
        w.write_all(b"\x1b[")?;
        w.write_all(code)?;
        w.write_all(b"m")
    };
    if removed.contains(Modifier::REVERSED) {
        sgr(b"27")?;
    }
    let reset_intensity = removed.intersects(Modifier::BOLD | Modifier::DIM);
    if reset_intensity {
        sgr(b"22")?;
        if to.contains(Modifier::DIM) {
            sgr(b"2")?;
        }
        if to.contains(Modifier::BOLD) {
            sgr(b"1")?;
        }
    }
    for (m, code) in [
        (Modifier::ITALIC, &b"23"[..]),
        (Modifier::UNDERLINED, b"24"),
        (Modifier::CROSSED_OUT, b"29"),
        (Modifier::HIDDEN, b"28"),
    ] {
        if removed.contains(m) {
            sgr(code)?;
        }
    }
    if removed.intersects(Modifier::SLOW_BLINK | Modifier::RAPID_BLINK) {
        sgr(b"25")?;
    }
    let added = to - from;
    for (m, code, unless_reset) in [
        (Modifier::REVERSED, &b"7"[..], false),
        (Modifier::BOLD, b"1", true),
        (Modifier::ITALIC, b"3", false),
        (Modifier::UNDERLINED, b"4", false),
        (Modifier::DIM, b"2", true),
        (Modifier::CROSSED_OUT, b"9", false),
        (Modifier::HIDDEN, b"8", false),
        (Modifier::SLOW_BLINK, b"5", false),
        (Modifier::RAPID_BLINK, b"6", false),
    ] {
        if added.contains(m) && !(unless_reset && reset_intensity) {
            sgr(code)?;
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Layer {
    Fore,
    Back,
    Under,
}

/// One escape sequence, built on the stack: `ESC [` and at most 3 colours of `38;2;r;g;b`.
struct Seq {
    buf: [u8; 48],
    len: usize,
}

impl Seq {
    fn new() -> Seq {
        let mut buf = [0; 48];
        buf[..2].copy_from_slice(b"\x1b[");
        Seq { buf, len: 2 }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn byte(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn text(&mut self, s: &[u8]) {
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
    }

    fn num(&mut self, n: u16) {
        self.text(itoa::Buffer::new().format(n).as_bytes());
    }

    /// crossterm's `Colored` as text: ratatui's colour mapped as `IntoCrossterm` maps it.
    fn color(&mut self, layer: Layer, c: Color, colors: bool) {
        if !colors {
            return;
        }
        let (reset, set) = match layer {
            Layer::Fore => (b"39", b"38;"),
            Layer::Back => (b"49", b"48;"),
            Layer::Under => (b"59", b"58;"),
        };
        let index = match c {
            Color::Reset => return self.text(reset),
            Color::Black => 0,
            Color::Red => 1,
            Color::Green => 2,
            Color::Yellow => 3,
            Color::Blue => 4,
            Color::Magenta => 5,
            Color::Cyan => 6,
            Color::Gray => 7,
            Color::DarkGray => 8,
            Color::LightRed => 9,
            Color::LightGreen => 10,
            Color::LightYellow => 11,
            Color::LightBlue => 12,
            Color::LightMagenta => 13,
            Color::LightCyan => 14,
            Color::White => 15,
            Color::Indexed(i) => i,
            Color::Rgb(r, g, b) => {
                self.text(set);
                self.text(b"2;");
                for (k, v) in [r, g, b].into_iter().enumerate() {
                    if k > 0 {
                        self.byte(b';');
                    }
                    self.num(u16::from(v));
                }
                return;
            }
        };
        self.text(set);
        self.text(b"5;");
        self.num(u16::from(index));
    }
}

impl<W: Write> Backend for Direct<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        encode(self.inner.writer_mut(), content, self.colors)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tui::xorshift::Rng;

    fn color(rng: &mut Rng) -> Color {
        const NAMED: [Color; 17] = [
            Color::Reset,
            Color::Black,
            Color::Red,
            Color::Green,
            Color::Yellow,
            Color::Blue,
            Color::Magenta,
            Color::Cyan,
            Color::Gray,
            Color::DarkGray,
            Color::LightRed,
            Color::LightGreen,
            Color::LightYellow,
            Color::LightBlue,
            Color::LightMagenta,
            Color::LightCyan,
            Color::White,
        ];
        match rng.below(4) {
            0 => Color::Indexed(rng.below(256) as u8),
            1 => Color::Rgb(
                rng.below(256) as u8,
                rng.below(256) as u8,
                rng.below(256) as u8,
            ),
            _ => NAMED[rng.below(17) as usize],
        }
    }

    /// Cells in runs and jumps (a run continues on the next column, a jump goes almost
    /// anywhere), styles that mostly repeat and sometimes change anything.
    fn frame(rng: &mut Rng) -> Vec<(u16, u16, Cell)> {
        const SYMBOLS: [&str; 8] = [" ", "a", "│", "⣿", "█", "é", "😀", "e\u{301}"];
        let mut cells = Vec::new();
        let (mut x, mut y) = (0u16, 0u16);
        let mut cell = Cell::default();
        for _ in 0..rng.below(300) {
            match rng.below(10) {
                0 => {
                    // Below u16::MAX: crossterm and ratatui add 1 to it unchecked.
                    x = rng.below(60_000) as u16;
                    y = rng.below(60_000) as u16;
                }
                1 => (x, y) = (0, y.wrapping_add(1)),
                _ => x = x.wrapping_add(1),
            }
            if rng.below(4) == 0 {
                cell.fg = color(rng);
            }
            if rng.below(4) == 0 {
                cell.bg = color(rng);
            }
            if rng.below(8) == 0 {
                cell.underline_color = color(rng);
            }
            if rng.below(4) == 0 {
                cell.modifier = Modifier::from_bits_truncate(rng.next() as u16);
            }
            cell.set_symbol(SYMBOLS[rng.below(8) as usize]);
            cells.push((x, y, cell.clone()));
        }
        cells
    }

    #[test]
    fn every_frame_is_sent_byte_for_byte_as_crossterm_sends_it() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for n in 0..2_000 {
            let cells = frame(&mut rng);
            let iter = || cells.iter().map(|(x, y, c)| (*x, *y, c));
            let mut theirs = CrosstermBackend::new(Vec::new());
            theirs.draw(iter()).expect("crossterm draws");
            let mut ours = Direct::new(Vec::new());
            ours.draw(iter()).expect("draws");
            assert_eq!(
                String::from_utf8_lossy(ours.inner.writer()),
                String::from_utf8_lossy(theirs.writer()),
                "frame {n}"
            );
        }
    }

    #[test]
    fn without_colours_only_the_sequences_crossterm_leaves_empty_are_written() {
        let mut cell = Cell::default();
        cell.set_symbol("x").fg = Color::Red;
        let mut out = Vec::new();
        encode(&mut out, [(3, 1, &cell)].into_iter(), false).expect("writes");
        assert_eq!(
            String::from_utf8_lossy(&out),
            "\x1b[2;4H\x1b[;mx\x1b[m\x1b[m\x1b[m\x1b[0m"
        );
    }
}
