//! Help overlay, two pages generated from tables so they cannot drift: the keys (from
//! `keys::BINDINGS`) and the legend of every abbreviation and glyph (from
//! `legend::LEGEND`). It scrolls (↑/j, PgUp/PgDn, wheel) instead of cutting lines off.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::legend::LEGEND;
use super::theme::Theme;
use crate::app::App;
use crate::keys::listed;

fn ascii_keys(label: &str) -> String {
    label
        .replace('→', "Right")
        .replace('←', "Left")
        .replace('↑', "Up")
        .replace('↓', "Down")
}

/// (left column, right column) of a help page.
pub fn page_rows(page: u8, ascii: bool) -> Vec<(String, &'static str)> {
    if page == 0 {
        listed()
            .map(|b| {
                let l = if ascii {
                    ascii_keys(b.label)
                } else {
                    b.label.to_string()
                };
                (l, b.desc)
            })
            .collect()
    } else {
        LEGEND
            .iter()
            .map(|t| (t.sym(ascii).to_string(), t.meaning))
            .collect()
    }
}

pub fn render_help(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let rows = page_rows(app.help_page, theme.ascii);
    let label_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let want_w = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0) + label_w + 5;
    let w = (want_w as u16).min(area.width);
    // Labels in a column when it leaves room for the text; otherwise the text follows the
    // label and wraps, so a 40-column pane still reads every line whole.
    let column = usize::from(w.saturating_sub(2)) >= label_w + 24;
    let h = if column {
        (rows.len() as u16 + 2).min(area.height)
    } else {
        area.height
    };
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    let title = if app.help_page == 0 {
        " keys 1/2 · ? legend · Esc closes "
    } else {
        " legend 2/2 · ? or Esc closes "
    };
    let title = if theme.ascii {
        title.replace('·', "-")
    } else {
        title.to_string()
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(title)
        .title_style(theme.title());
    let inner = block.inner(r);
    block.render(r, buf);
    let visible = usize::from(inner.height);
    if visible == 0 || inner.width == 0 {
        return;
    }
    let lines: Vec<Line> = rows
        .iter()
        .map(|(label, desc)| {
            let label = if column {
                format!(" {label:<label_w$} ")
            } else {
                format!(" {label} ")
            };
            Line::from(vec![
                Span::styled(label, theme.title()),
                Span::styled(super::alerts::fold(desc, theme), theme.normal()),
            ])
        })
        .collect();
    let text = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = text.line_count(inner.width);
    let max_scroll = total.saturating_sub(visible);
    let scroll = usize::from(app.help_scroll).min(max_scroll);
    text.scroll((scroll as u16, 0)).render(inner, buf);
    let below = total.saturating_sub(scroll + visible);
    if below > 0 {
        let y = inner.y + inner.height - 1;
        let width = usize::from(inner.width);
        buf.set_stringn(inner.x, y, " ".repeat(width), width, theme.normal());
        let more = format!(" {below} more lines: j/PgDn scrolls");
        buf.set_stringn(inner.x, y, more, width, theme.warn());
    }
}
