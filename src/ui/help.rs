//! Help overlay, generated from the key table so it can never drift from the bindings.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, Borders, Clear, Widget};

use super::theme::Theme;
use crate::keys::BINDINGS;

pub fn render_help(area: Rect, buf: &mut Buffer, theme: &Theme) {
    let label_w = BINDINGS
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0);
    let want_w = BINDINGS.iter().map(|b| b.desc.len()).max().unwrap_or(0) + label_w + 5;
    let w = (want_w as u16).min(area.width);
    let h = (BINDINGS.len() as u16 + 2).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(" keys (Esc closes) ")
        .title_style(theme.title());
    let inner = block.inner(r);
    block.render(r, buf);
    let rows = usize::from(inner.height);
    for (i, b) in BINDINGS.iter().enumerate().take(rows) {
        let y = inner.y + i as u16;
        let label: String = if theme.ascii {
            b.label
                .replace('→', "Right")
                .replace('←', "Left")
                .replace('↑', "Up")
                .replace('↓', "Down")
        } else {
            b.label.into()
        };
        buf.set_stringn(
            inner.x + 1,
            y,
            &label,
            usize::from(inner.width),
            theme.title(),
        );
        let x = inner.x + 2 + label_w as u16;
        if x < inner.x + inner.width {
            buf.set_stringn(
                x,
                y,
                b.desc,
                usize::from(inner.x + inner.width - x),
                theme.normal(),
            );
        }
    }
    if BINDINGS.len() > rows && inner.height > 0 {
        let more = format!("{} more: enlarge the terminal", BINDINGS.len() - rows);
        buf.set_stringn(
            inner.x + 1,
            inner.y + inner.height - 1,
            more,
            usize::from(inner.width),
            theme.warn(),
        );
    }
}
