//! Text into the buffer, the way ratatui writes it, without splitting printable ASCII into
//! graphemes. ratatui segments every string it writes (`unicode-segmentation`) and measures
//! every piece (`unicode-width`), a fifth of a redraw's time for a screen that is almost all
//! ASCII (issue 21). A string of printable ASCII is one cell a byte, so it is written
//! straight; anything else (a control character, a non-ASCII name, an aligned line) goes
//! through ratatui unchanged. The tests hold both ways to the same cells.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

/// One cell a byte, nothing dropped: bytes 0x20..=0x7E.
fn plain(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// As `line.render(area, buf)`: a left-aligned line span by span, printable ASCII spans
/// straight, any other span by ratatui (as `Line` itself renders each span).
pub(crate) fn line(line: &Line, area: Rect, buf: &mut Buffer) {
    if !matches!(line.alignment, None | Some(Alignment::Left)) {
        line.render(area, buf);
        return;
    }
    let area = area.intersection(buf.area);
    let width = |s: &Span| {
        if plain(&s.content) {
            s.content.len()
        } else {
            s.width()
        }
    };
    if area.is_empty() || line.spans.iter().map(width).sum::<usize>() == 0 {
        return;
    }
    buf.set_style(Rect { height: 1, ..area }, line.style);
    let (mut x, y, right) = (area.x, area.y, area.right());
    for span in &line.spans {
        if x >= right {
            return;
        }
        if plain(&span.content) {
            x = put_plain(buf, x, y, &span.content, right - x, span.style);
        } else {
            span.render(Rect::new(x, y, right - x, 1), buf);
            x = x.saturating_add(u16::try_from(span.width()).unwrap_or(u16::MAX));
        }
    }
}

/// Printable ASCII `s` from (x, y), at most `room` cells; returns the x after it.
fn put_plain(buf: &mut Buffer, x: u16, y: u16, s: &str, room: u16, style: Style) -> u16 {
    let n = s.len().min(usize::from(room));
    if n == 0 {
        return x;
    }
    let at = buf.index_of(x, y);
    for (cell, b) in buf.content[at..at + n].iter_mut().zip(s.bytes()) {
        cell.set_char(char::from(b)).set_style(style);
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
    if !plain(s) {
        return buf.set_stringn(x, y, s, max_width, style);
    }
    let max_width = u16::try_from(max_width).unwrap_or(u16::MAX);
    let room = buf.area.right().saturating_sub(x).min(max_width);
    (put_plain(buf, x, y, s, room, style), y)
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
    fn lines_land_in_the_same_cells_as_ratatui_puts_them() {
        let areas = [
            Rect::new(0, 0, 12, 1),
            Rect::new(3, 0, 5, 1),
            Rect::new(11, 1, 4, 1),
            Rect::new(0, 0, 0, 1),
        ];
        let aligns = [None, Some(Alignment::Left), Some(Alignment::Right)];
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
