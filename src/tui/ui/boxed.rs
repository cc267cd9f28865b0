//! A bordered box with titles, drawn as ratatui's `Block` draws it but without its pass over
//! every cell inside. `Block::render` first sets its own style on its whole area, even when
//! that style is empty and changes nothing; for a GPU card that is most of the screen, and
//! the pass was 14 % of a live redraw's instructions (callgrind of `bench/draw.rs`, issue
//! 21). Here the same block is drawn as four thin blocks, one for each side, so the pass
//! covers only the border. The tests hold both ways to the same cells.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Widget};

/// As `frame.borders(Borders::ALL)` with `top` titles on its top row and `bottom` titles on
/// its bottom row, rendered on `area`. `frame` holds the border set and styles (and must not
/// have a style of its own: that style is what is left out); each title keeps its own
/// alignment.
pub(crate) fn render<'a>(
    frame: &Block<'a>,
    top: Vec<Line<'a>>,
    bottom: Vec<Line<'a>>,
    area: Rect,
    buf: &mut Buffer,
) {
    let area = area.intersection(buf.area);
    let side = |borders| frame.clone().borders(borders);
    if area.height < 2 || area.width < 2 {
        // Too small for rows of their own: the block as it is (and as cheap).
        titled(side(Borders::ALL), top, bottom).render(area, buf);
        return;
    }
    let top_row = Rect { height: 1, ..area };
    titled(
        side(Borders::LEFT | Borders::TOP | Borders::RIGHT),
        top,
        vec![],
    )
    .render(top_row, buf);
    let bottom_row = Rect {
        y: area.bottom() - 1,
        ..top_row
    };
    titled(
        side(Borders::LEFT | Borders::BOTTOM | Borders::RIGHT),
        vec![],
        bottom,
    )
    .render(bottom_row, buf);
    let left = Rect {
        y: area.y + 1,
        height: area.height - 2,
        width: 1,
        ..area
    };
    side(Borders::LEFT).render(left, buf);
    let right = Rect {
        x: area.right() - 1,
        ..left
    };
    side(Borders::RIGHT).render(right, buf);
}

fn titled<'a>(block: Block<'a>, top: Vec<Line<'a>>, bottom: Vec<Line<'a>>) -> Block<'a> {
    let block = top.into_iter().fold(block, Block::title_top);
    bottom.into_iter().fold(block, Block::title_bottom)
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
        for w in [2u16, 3, 5, 9, 24, 40] {
            for h in [1u16, 2, 3, 4, 7] {
                for (k, set) in sets.iter().enumerate() {
                    let whole = Rect::new(0, 0, 44, 9);
                    let area = Rect::new(1 + k as u16, 1, w, h);
                    let frame = Block::new()
                        .border_set(*set)
                        .border_style(Style::new().fg(Color::Cyan))
                        .title_style(Style::new().bold());
                    let top = vec![
                        Line::from("GPU 0 · H200"),
                        Line::from(" ‼ 2 ").right_aligned().red(),
                        Line::styled("0-141 GiB", Style::new().dim()).right_aligned(),
                    ];
                    let bottom = vec![Line::from(" +3 more: Enter ").right_aligned()];
                    let mut want = filled(whole);
                    let mut block = frame.clone().borders(Borders::ALL);
                    for t in top.clone() {
                        block = block.title(t);
                    }
                    for t in bottom.clone() {
                        block = block.title_bottom(t);
                    }
                    block.render(area, &mut want);
                    let mut got = filled(whole);
                    render(&frame, top, bottom, area, &mut got);
                    assert_eq!(got, want, "{w}x{h}, set {k}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, 90);
    }

    #[test]
    fn the_inside_is_left_as_it_was() {
        let whole = Rect::new(0, 0, 12, 6);
        let mut buf = filled(whole);
        let before = buf.clone();
        render(
            &Block::new(),
            vec![Line::from("t")],
            vec![],
            whole,
            &mut buf,
        );
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
