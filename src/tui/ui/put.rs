//! Text into the buffer, the way ratatui writes it, without splitting it into graphemes.
//! ratatui segments every string it writes (`unicode-segmentation`) and measures every piece
//! (`unicode-width`), a fifth of a redraw's time for a screen that is almost all ASCII and a
//! few symbols. A string of printable ASCII and of the symbols in `one_cell` is one
//! cell a character, so it is written straight; anything else (a control character, a
//! combining accent, a wide or emoji character, an aligned line) goes through ratatui
//! unchanged. The tests hold both ways to the same cells, for every character of `one_cell`.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

/// Characters that take one cell and are a grapheme of their own beside any other of them:
/// printable ASCII, Latin-1's printable letters and signs (not the soft hyphen), unaccented
/// Greek letters (σ), and the blocks of punctuation, arrows, mathematical operators, box drawing,
/// block elements, geometric shapes (the sort arrows ▲▼, ▶, ●) and braille that the screens
/// draw with, and the few other signs they use (ℹ ⚠ ✓ ✗). A line with any other character
/// goes through ratatui's segmentation whole. No combining mark, joiner, variation selector
/// or wide character is among them
/// (`every_one_cell_character_is_written_as_ratatui_writes_it`).
///
/// Asked of every cell of every frame that is not ASCII (a chart's braille, twice: when it
/// is written and when it is compared with what the terminal shows), so by the character's
/// block of 256 first: a chain of the ranges cost 60 instructions a call, a twentieth of a
/// redraw (callgrind of `bench/draw.rs`).
#[inline]
pub(crate) fn one_cell(c: char) -> bool {
    one_cell_code(u32::from(c))
}

/// `one_cell` of a character's code point.
#[inline]
pub(crate) fn one_cell_code(c: u32) -> bool {
    match c >> 8 {
        0x00 => (0x20..0x7F).contains(&c) || (c >= 0xA1 && c != 0xAD),
        0x03 => matches!(c, 0x391..=0x3A1 | 0x3A3..=0x3A9 | 0x3B1..=0x3C9),
        0x20 => matches!(c, 0x2010..=0x2027 | 0x2030..=0x205E),
        0x21 => c == 0x2139 || c >= 0x2190,
        0x22 | 0x28 => true,
        // Not U+25FD and U+25FE: emoji, two cells wide.
        0x25 => c <= 0x25FC,
        0x26 => c == 0x26A0,
        0x27 => c == 0x2713 || c == 0x2717,
        _ => false,
    }
}

/// The cells `s` takes when each of its characters is one cell of its own (`one_cell`),
/// found in one pass; `None` for any other string (ratatui's to write).
fn plain(s: &str) -> Option<usize> {
    if s.is_ascii() {
        return s
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b))
            .then_some(s.len());
    }
    let mut n = 0;
    for c in s.chars() {
        if !one_cell(c) {
            return None;
        }
        n += 1;
    }
    Some(n)
}

/// The cells `line` takes, as `line.width()`.
pub(crate) fn width(line: &Line) -> usize {
    line.spans.iter().map(span_width).sum()
}

fn span_width(s: &Span) -> usize {
    plain(&s.content).unwrap_or_else(|| s.width())
}

/// As `line.render(area, buf)`: span by span, `plain` spans straight, any other span by
/// ratatui (as `Line` itself renders each span). A line that fits is placed by its
/// alignment; one that does not and is not left-aligned (ratatui then cuts its left) is
/// ratatui's.
pub(crate) fn line(line: &Line, area: Rect, buf: &mut Buffer) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    // As ratatui: a line of no width leaves even its style unset. A left-aligned line (nearly
    // every line drawn) needs no total: asked span by span, it stops at the first one that
    // has width (usually the first).
    let room = usize::from(area.width);
    let indent = match line.alignment {
        None | Some(Alignment::Left) if line.spans.iter().all(|s| span_width(s) == 0) => return,
        None | Some(Alignment::Left) => 0,
        Some(align) => match width(line) {
            0 => return,
            total if total > room => {
                line.render(area, buf);
                return;
            }
            total if align == Alignment::Center => (room - total) / 2,
            total => room - total,
        },
    };
    // A line's own style over its whole row: nearly always none (the spans have theirs),
    // and setting no style on each of a row's cells was 4,600 instructions a line.
    if line.style != Style::default() {
        buf.set_style(Rect { height: 1, ..area }, line.style);
    }
    // `indent` is at most `area.width`.
    let (mut x, y, right) = (area.x + indent as u16, area.y, area.right());
    for span in &line.spans {
        if x >= right {
            return;
        }
        match plain(&span.content) {
            Some(n) => x = put_plain(buf, x, y, &span.content, n, right - x, span.style),
            None => {
                span.render(Rect::new(x, y, right - x, 1), buf);
                x = x.saturating_add(u16::try_from(span.width()).unwrap_or(u16::MAX));
            }
        }
    }
}

/// A `plain` `s` of `cells` cells from (x, y), at most `room` of them; returns the x after it.
fn put_plain(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    s: &str,
    cells: usize,
    room: u16,
    style: Style,
) -> u16 {
    let n = cells.min(usize::from(room));
    if n == 0 {
        return x;
    }
    let at = buf.index_of(x, y);
    let row = buf.content[at..at + n].iter_mut();
    // A plain string of as many cells as bytes is ASCII.
    if cells == s.len() {
        for (cell, b) in row.zip(s.bytes()) {
            // Padding mostly lands on the blank a frame starts as: a space there needs no
            // new symbol (`set_char` builds one, 63 instructions).
            if b != b' ' || cell.symbol() != " " {
                cell.set_char(char::from(b));
            }
            cell.set_style(style);
        }
    } else {
        for (cell, c) in row.zip(s.chars()) {
            cell.set_char(c).set_style(style);
        }
    }
    x + n as u16
}

/// As `buf.set_stringn(x, y, s, max_width, style)`.
pub(crate) fn stringn(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    s: impl AsRef<str>,
    max_width: usize,
    style: impl Into<Style>,
) -> (u16, u16) {
    let (s, style) = (s.as_ref(), style.into());
    let Some(cells) = plain(s) else {
        return buf.set_stringn(x, y, s, max_width, style);
    };
    let max_width = u16::try_from(max_width).unwrap_or(u16::MAX);
    let room = buf.area.right().saturating_sub(x).min(max_width);
    (put_plain(buf, x, y, s, cells, room, style), y)
}

/// `s` on line `y` of `area`, from its left edge and cut at its width: as
/// `buf.set_stringn(area.x, y, s, area.width, style)`.
pub(crate) fn row(
    buf: &mut Buffer,
    area: Rect,
    y: u16,
    s: impl AsRef<str>,
    style: impl Into<Style>,
) -> (u16, u16) {
    stringn(buf, area.x, y, s, usize::from(area.width), style)
}

/// As `buf.set_string(x, y, s, style)`.
pub(crate) fn string(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    s: impl AsRef<str>,
    style: impl Into<Style>,
) -> (u16, u16) {
    stringn(buf, x, y, s, usize::MAX, style)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};

    const TEXTS: &[&str] = &[
        "",
        "a",
        "python train.py --epochs 3",
        "  12.5 GiB ",
        "tab\there",
        "bell\x07",
        "del\x7f",
        "naïve",
        "日本語",
        "e\u{301}",
        "\u{202e}evil",
        "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
        " 12.5 GiB · ‼ 2 … ",
        "⣿⣀─│▁█┌┐",
        "→ ≈ × ° µ ±",
        "soft\u{AD}hyphen",
        "‼\u{FE0F} emoji",
        "→\u{20D7} arrow",
    ];

    fn styles() -> [Style; 3] {
        [
            Style::default(),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            Style::new().bg(Color::Blue).remove_modifier(Modifier::DIM),
        ]
    }

    /// Every cell, as the terminal would get it.
    fn cells(buf: &Buffer) -> Vec<(String, Style)> {
        buf.content
            .iter()
            .map(|c| (c.symbol().to_string(), c.style()))
            .collect()
    }

    fn start() -> Buffer {
        let mut b = Buffer::empty(Rect::new(0, 0, 12, 2));
        b.set_string(0, 0, "xxxxxxxxxxxx", Style::new().italic());
        b
    }

    #[test]
    fn every_one_cell_character_is_written_as_ratatui_writes_it() {
        let mut n = 0;
        for c in (0..=0x2FFFu32)
            .filter_map(char::from_u32)
            .filter(|&c| one_cell(c))
        {
            // Alone, doubled, and between letters: one cell each, never joined.
            let s = format!("{c}a{c}{c}b");
            let (mut want, mut got) = (start(), start());
            let w = want.set_stringn(1, 0, &s, 99, Style::new().bold());
            let g = stringn(&mut got, 1, 0, &s, 99, Style::new().bold());
            assert_eq!(
                (g, cells(&got)),
                (w, cells(&want)),
                "U+{:04X}",
                u32::from(c)
            );
            assert_eq!(w.0, 6, "U+{:04X} takes one cell", u32::from(c));
            n += 1;
        }
        assert_eq!(
            n,
            95 + 12 + 82 + 49 + 24 + 47 + 1 + 112 + 256 + 160 + 93 + 3 + 256
        );
    }

    #[test]
    fn lines_land_in_the_same_cells_as_ratatui_puts_them() {
        let areas = [
            Rect::new(0, 0, 12, 1),
            Rect::new(3, 0, 5, 1),
            Rect::new(11, 1, 4, 1),
            Rect::new(0, 0, 0, 1),
        ];
        let aligns = [
            None,
            Some(Alignment::Left),
            Some(Alignment::Center),
            Some(Alignment::Right),
        ];
        for a in TEXTS {
            for b in TEXTS.iter().take(4) {
                for (s1, s2) in styles().into_iter().zip(styles().into_iter().rev()) {
                    for area in areas {
                        for align in aligns {
                            let mut l =
                                Line::from(vec![Span::styled(*a, s1), Span::styled(*b, s2)])
                                    .style(s2);
                            l.alignment = align;
                            let (mut want, mut got) = (start(), start());
                            (&l).render(area, &mut want);
                            line(&l, area, &mut got);
                            assert_eq!(cells(&got), cells(&want), "{l:?} in {area:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn strings_land_in_the_same_cells_as_set_stringn_puts_them() {
        for s in TEXTS {
            for style in styles() {
                for (x, y, max) in [(0, 0, 99), (4, 1, 3), (11, 0, 5), (2, 0, 0)] {
                    let (mut want, mut got) = (start(), start());
                    let w = want.set_stringn(x, y, s, max, style);
                    let g = stringn(&mut got, x, y, s, max, style);
                    assert_eq!(g, w, "{s:?} at {x},{y} max {max}");
                    assert_eq!(cells(&got), cells(&want), "{s:?} at {x},{y} max {max}");
                }
            }
        }
    }
}
