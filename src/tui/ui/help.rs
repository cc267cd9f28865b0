//! Help overlay, two pages generated from tables so they cannot drift: the keys (from
//! `keys::BINDINGS`) and the legend of every abbreviation and glyph (from
//! `legend::LEGEND`). It scrolls (k/j, g/G, PgUp/PgDn, wheel) instead of cutting lines off.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::legend::LEGEND;
use super::theme::Theme;
use crate::tui::app::App;
use crate::tui::keys::listed;

fn ascii_keys(label: &str) -> String {
    label
        .replace('→', "Right")
        .replace('←', "Left")
        .replace('↑', "Up")
        .replace('↓', "Down")
}

/// (left column, right column) of a help page.
pub(crate) fn page_rows(page: u8, ascii: bool) -> Vec<(String, &'static str)> {
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

/// Greedy word wrap to `width` columns (a word longer than the line gets a line of its own).
fn wrap_words(s: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for word in s.split(' ') {
        let cur = out.last_mut().expect("starts with one line");
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            out.push(word.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    out
}

/// The overlay over `area`: the page `app.help_page`, scrolled by `app.help_scroll`.
pub(crate) fn render_help(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
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
        " keys 1/2 · ? legend · q or Esc closes "
    } else {
        " legend 2/2 · q, ? or Esc closes "
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
    // In column mode the text wraps under itself (hanging indent), so labels stay a clean
    // column; otherwise ratatui wraps the whole line.
    let text_w = usize::from(inner.width).saturating_sub(label_w + 2).max(1);
    let mut lines: Vec<Line> = Vec::new();
    for (label, desc) in &rows {
        let desc = super::alerts::fold(desc, theme);
        if !column {
            lines.push(Line::from(vec![
                Span::styled(format!(" {label} "), theme.title()),
                Span::styled(desc, theme.normal()),
            ]));
            continue;
        }
        for (i, part) in wrap_words(&desc, text_w).into_iter().enumerate() {
            let head = if i == 0 { label.as_str() } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!(" {head:<label_w$} "), theme.title()),
                Span::styled(part, theme.normal()),
            ]));
        }
    }
    let text = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = text.line_count(inner.width);
    let max_scroll = total.saturating_sub(visible);
    let scroll = usize::from(app.help_scroll).min(max_scroll);
    // Where End lands and where `k` climbs from (the one thing help tells the app back).
    app.help_max
        .set(u16::try_from(max_scroll).unwrap_or(u16::MAX));
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
