//! A bordered box with titles, drawn cell by cell into the buffer. ratatui's `Block` first
//! sets its own style on its whole area, even when that style is empty and changes nothing
//! (for a GPU card, most of the screen: 14 % of a live redraw's instructions), then merges
//! each border symbol with what the cell held, and writes its titles through `Line::render`,
//! which splits every string into graphemes; what was left of it after the first pass was
//! still 12 % of the main thread's instructions at 1 s (callgrind of the release build
//! against the fake NVML). Here the border cells are set straight and the titles
//! go through `put::line`. The tests hold this to `Block` for the same cells.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Widget};

/// What a box is drawn with: `Block::new().borders(Borders::ALL).border_set(set)
/// .border_style(border).title_style(title)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub set: border::Set<'static>,
    pub border: Style,
    pub title: Style,
}

impl Frame {
    /// The area inside the border, as `Block::inner` gives it.
    pub(crate) fn inner(area: Rect) -> Rect {
        Block::bordered().inner(area)
    }

    fn block<'a>(&self) -> Block<'a> {
        Block::new()
            .borders(Borders::ALL)
            .border_set(self.set)
            .border_style(self.border)
            .title_style(self.title)
    }
}

/// As `frame.block()` with `top` titles on its top row and `bottom` titles on its bottom
/// row, rendered on `area`; each title keeps its own alignment (none is left).
pub(crate) fn render(frame: &Frame, top: &[Line], bottom: &[Line], area: Rect, buf: &mut Buffer) {
    let area = area.intersection(buf.area);
    if area.height < 2 || area.width < 2 {
        // Too small for rows of their own: the block as it is (and as cheap).
        let block = top.iter().cloned().fold(frame.block(), Block::title_top);
        bottom
            .iter()
            .cloned()
            .fold(block, Block::title_bottom)
            .render(area, buf);
        return;
    }
    let (s, style) = (frame.set, frame.border);
    let left = area.x;
    let (top_y, bottom_y) = (area.y, area.bottom() - 1);
    // Straight into the rows: indexing the buffer by position checks and multiplies for
    // every cell.
    let (w, stride) = (usize::from(area.width), usize::from(buf.area.width));
    let (top_i, bottom_i) = (buf.index_of(left, top_y), buf.index_of(left, bottom_y));
    let cells = &mut buf.content;
    let mut put = |i: usize, sym: &str| {
        cells[i].set_symbol(sym).set_style(style);
    };
    for i in 1..w - 1 {
        put(top_i + i, s.horizontal_top);
        put(bottom_i + i, s.horizontal_bottom);
    }
    for i in (top_i + stride..bottom_i).step_by(stride) {
        put(i, s.vertical_left);
        put(i + w - 1, s.vertical_right);
    }
    put(top_i, s.top_left);
    put(top_i + w - 1, s.top_right);
    put(bottom_i, s.bottom_left);
    put(bottom_i + w - 1, s.bottom_right);
    let inside = |y| Rect::new(left + 1, y, area.width - 2, 1);
    titles(top, inside(top_y), frame.title, buf);
    titles(bottom, inside(bottom_y), frame.title, buf);
}

fn aligned(line: &Line) -> Alignment {
    line.alignment.unwrap_or(Alignment::Left)
}

/// The titles of one row, placed as `Block` places them: the left ones from the left, one
/// column apart; the centred ones together in the middle; the right ones from the right.
fn titles(lines: &[Line], area: Rect, style: Style, buf: &mut Buffer) {
    let width = |l: &Line| u16::try_from(super::put::width(l)).unwrap_or(u16::MAX);
    let put = |line: &Line, at: Rect, buf: &mut Buffer| {
        buf.set_style(at, style);
        super::put::line(line, at, buf);
    };
    let mut room = area;
    for l in lines.iter().filter(|l| aligned(l) == Alignment::Left) {
        if room.is_empty() {
            break;
        }
        let w = width(l);
        put(
            l,
            Rect {
                width: w.min(room.width),
                ..room
            },
            buf,
        );
        let advance = w.saturating_add(1);
        room.x = room.x.saturating_add(advance);
        room.width = room.width.saturating_sub(advance);
    }
    // Centred titles (no screen has one yet) are `Block`'s own: on this row without borders,
    // its titles' row is the row itself.
    let mut centred = lines
        .iter()
        .filter(|l| aligned(l) == Alignment::Center)
        .peekable();
    if centred.peek().is_some() {
        (centred.cloned())
            .fold(Block::new().title_style(style), Block::title_top)
            .render(area, buf);
    }
    let mut room = area;
    for l in lines
        .iter()
        .rev()
        .filter(|l| aligned(l) == Alignment::Right)
    {
        if room.is_empty() {
            break;
        }
        let w = width(l);
        let at = Rect {
            x: room.right().saturating_sub(w).max(room.left()),
            width: w.min(room.width),
            ..room
        };
        put(l, at, buf);
        room.width = room.width.saturating_sub(w).saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Style, Stylize};
    use ratatui::symbols::border;

    fn filled(area: Rect) -> Buffer {
        let mut buf = Buffer::empty(area);
        for (i, c) in buf.content.iter_mut().enumerate() {
            c.set_char(char::from(b'a' + (i % 26) as u8))
                .set_fg(Color::Indexed((i % 7) as u8));
        }
        buf
    }

    #[test]
    fn the_same_cells_as_the_whole_block() {
        let sets = [border::PLAIN, border::ROUNDED, border::THICK];
        let mut n = 0;
        for w in [1u16, 2, 3, 5, 9, 24, 40] {
            for h in [1u16, 2, 3, 4, 7] {
                for (k, set) in sets.iter().enumerate() {
                    let whole = Rect::new(0, 0, 44, 9);
                    let area = Rect::new(1 + k as u16, 1, w, h);
                    let frame = Frame {
                        set: *set,
                        border: Style::new().fg(Color::Cyan),
                        title: Style::new().bold(),
                    };
                    let top = vec![
                        Line::from("GPU 0 · H200"),
                        Line::from("日本"),
                        Line::from(" ‼ 2 ").right_aligned().red(),
                        Line::styled("0-141 GiB", Style::new().dim()).right_aligned(),
                        Line::from("mid").centered(),
                    ];
                    let bottom = vec![
                        Line::from(" +3 more: Enter ").right_aligned(),
                        Line::from("e\u{301}x").right_aligned(),
                        Line::from("left"),
                    ];
                    let mut want = filled(whole);
                    let mut block = frame.block();
                    for t in top.clone() {
                        block = block.title(t);
                    }
                    for t in bottom.clone() {
                        block = block.title_bottom(t);
                    }
                    block.render(area, &mut want);
                    let mut got = filled(whole);
                    render(&frame, &top, &bottom, area, &mut got);
                    assert_eq!(got, want, "{w}x{h}, set {k}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, 105);
    }

    #[test]
    fn the_inside_is_left_as_it_was() {
        let whole = Rect::new(0, 0, 12, 6);
        let mut buf = filled(whole);
        let before = buf.clone();
        let frame = Frame {
            set: border::PLAIN,
            border: Style::new(),
            title: Style::new(),
        };
        render(&frame, &[Line::from("t")], &[], whole, &mut buf);
        for y in 1..5 {
            for x in 1..11 {
                assert_eq!(buf[(x, y)], before[(x, y)], "{x},{y}");
            }
        }
        assert_eq!(buf[(0, 0)].symbol(), "┌");
        assert_eq!(buf[(1, 0)].symbol(), "t");
        assert_eq!(buf[(11, 5)].symbol(), "┘");
    }
}
