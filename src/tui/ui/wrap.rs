//! Long text in a narrow pane: wrapped at spaces only, so a setting people copy
//! (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`) is never split inside; and a
//! scrolled text whose hidden lines are counted on rows of their own, never written
//! over the text. ratatui's word wrapper splits a word that does not fit the rest of a
//! line in some cases (seen at 60 columns), hence this small one.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::paint::Painter;
use super::theme::Theme;

/// `text` as lines of at most `width` characters, broken at spaces. A word wider than
/// the pane cannot be shown whole: it is replaced by where to read it whole, rather than
/// cut into pieces someone would copy as one.
pub(crate) fn words(text: &str, width: usize) -> Vec<String> {
    fill(text, width, true)
}

/// `words`; without `replace` (the replacement's own words, in a pane narrower than
/// them) a word too wide is cut to the width.
fn fill(text: &str, width: usize, replace: bool) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if n > width {
            // Its own lines, in words that do fit.
            if len > 0 {
                out.push(std::mem::take(&mut line));
                len = 0;
            }
            if replace {
                out.extend(fill(&too_wide(n), width, false));
            } else {
                out.push(word.chars().take(width).collect());
            }
            continue;
        }
        if len > 0 && len + 1 + n > width {
            out.push(std::mem::take(&mut line));
            len = 0;
        }
        if len > 0 {
            line.push(' ');
            len += 1;
        }
        line.push_str(word);
        len += n;
    }
    if len > 0 {
        out.push(line);
    }
    out
}

/// What stands in for a word of `n` characters that no line of the pane can hold.
fn too_wide(n: usize) -> String {
    format!("[a setting {n} characters wide: widen the pane, or `gpumon report` prints it whole]")
}

/// `lines` in `area` from line `scroll` on, wrapped to its width. When they do not fit,
/// a row at the top says how many lines are above (PgUp) and one at the bottom how many
/// are below (PgDn): rows of their own, so no line of the text is hidden under them.
pub(crate) fn paint_scrolled(
    p: &mut Painter,
    lines: Vec<Line<'static>>,
    scroll: u16,
    area: Rect,
    theme: &Theme,
) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let text = Paragraph::new(lines).wrap(Wrap { trim: true });
    let total = text.line_count(area.width);
    let h = usize::from(area.height);
    let (top, text_h, below, scroll) = layout(total, h, usize::from(scroll));
    let body = Rect {
        y: area.y + u16::from(top),
        height: text_h as u16,
        ..area
    };
    p.paint("alert message", |buf| {
        text.scroll((scroll as u16, 0)).render(body, buf)
    });
    let row = |y: u16| Rect {
        y,
        height: 1,
        ..area
    };
    if top {
        let t = format!("{scroll} lines above: PgUp");
        p.paint("lines above", |buf| {
            super::scroll::indicator(row(area.y), &t, buf, theme)
        });
    }
    if below > 0 {
        let t = format!("{below} more lines: PgDn");
        p.paint("lines below", |buf| {
            super::scroll::indicator(row(body.bottom()), &t, buf, theme)
        });
    }
}

/// For `total` lines in `h` rows scrolled by `scroll`: whether the top row counts the
/// lines above, how many rows the text gets, how many lines are left below, and the
/// scroll position clamped so the last line can be reached and no further.
fn layout(total: usize, h: usize, scroll: usize) -> (bool, usize, usize, usize) {
    if total <= h || h < 2 {
        let scroll = scroll.min(total.saturating_sub(h));
        return (false, h, total.saturating_sub(scroll + h), scroll);
    }
    // Scrolled to the end: the top row counts what is above, the rest is text.
    let scroll = scroll.min(total - (h - 1));
    let top = scroll > 0;
    let room = h - usize::from(top);
    if scroll + room >= total {
        return (top, room, 0, scroll);
    }
    // Lines below too: the bottom row counts them (with three rows or more; with two,
    // the text keeps one row and the bottom row, the top count is left out).
    let top = top && h >= 3;
    let text_h = h - usize::from(top) - 1;
    (top, text_h, total - scroll - text_h, scroll)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REMEDY: &str = "Remedy: restart from a checkpoint with \
        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows segments in place.";

    #[test]
    fn a_setting_is_never_split() {
        for w in 49..90 {
            let lines = words(REMEDY, w);
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,")),
                "{w}: {lines:?}"
            );
            assert!(
                lines.iter().all(|l| l.chars().count() <= w),
                "{w}: {lines:?}"
            );
        }
    }

    #[test]
    fn a_word_wider_than_the_pane_says_where_to_read_it() {
        let lines = words(REMEDY, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("PYTORCH")), "{lines:?}");
        assert!(lines.join(" ").contains("gpumon report"), "{lines:?}");
        assert!(lines.join(" ").ends_with("grows segments in place."));
    }

    #[test]
    fn scrolled_text_keeps_rows_for_its_counts() {
        // 20 lines in 6 rows.
        assert_eq!(layout(20, 6, 0), (false, 5, 15, 0));
        assert_eq!(layout(20, 6, 3), (true, 4, 13, 3));
        assert_eq!(layout(20, 6, 15), (true, 5, 0, 15));
        assert_eq!(layout(20, 6, 99), (true, 5, 0, 15), "clamped to the end");
        assert_eq!(layout(4, 6, 3), (false, 6, 0, 0));
        for h in 1..8 {
            for s in 0..25 {
                let (top, text_h, below, scroll) = layout(20, h, s);
                let rows = usize::from(top) + text_h + usize::from(below > 0 && h >= 2);
                assert!(rows <= h, "{h} {s}");
                assert_eq!(scroll + text_h + below, 20, "{h} {s}");
            }
        }
    }
}
