//! A list taller than its pane: which rows show, and a row of its own at each end that
//! says how many are hidden there (`+2 above`, `+6 below (j)`), so scrolling never hides
//! rows without a word. Shared by the process table and the alerts list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::theme::Theme;

/// The rows of a list of `n` shown in `rows` lines with `selected` on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// Index of the first row shown.
    pub first: usize,
    /// How many rows are shown.
    pub shown: usize,
    /// Rows hidden above and below.
    pub above: usize,
    pub below: usize,
    /// Whether each count has a line of its own (above the first row, below the last).
    pub line_above: bool,
    pub line_below: bool,
}

/// Fit `n` rows into `rows` lines keeping `selected` visible. When the list does not fit,
/// each hidden end takes one line for its count; with two lines, one row and the count of
/// the end that hides more; with one line, no count (the caller says it elsewhere).
pub(crate) fn window(n: usize, selected: usize, rows: usize) -> Window {
    let selected = selected.min(n.saturating_sub(1));
    let at = |first: usize, shown: usize, line_above: bool, line_below: bool| Window {
        first,
        shown,
        above: first,
        below: n - first - shown,
        line_above,
        line_below,
    };
    if n <= rows {
        return at(0, n, false, false);
    }
    if rows < 3 {
        let shown = rows.min(1);
        let first = if shown == 1 { selected } else { 0 };
        let v = at(first, shown, false, false);
        if rows == 2 {
            // One line for both counts (see `texts`): below when anything is below.
            let below = v.below > 0;
            return Window {
                line_above: !below,
                line_below: below,
                ..v
            };
        }
        return v;
    }
    if selected < rows - 1 {
        // At the top: one indicator line below.
        at(0, rows - 1, false, true)
    } else if selected + 2 >= n {
        // At the bottom (a `+1 below` line would cost the row it counts): one indicator
        // line above. The middle case below reaches the same first row at this point, so
        // moving down never makes the rows jump.
        at(n - (rows - 1), rows - 1, true, false)
    } else {
        // In the middle: both, the selection on the last row shown.
        let shown = rows - 2;
        at(selected + 1 - shown, shown, true, true)
    }
}

/// The texts of the indicator lines (above, below): a count whose end has no line of its
/// own goes on the other line (`+1 above, +1 below (j)`), so none is hidden unsaid.
pub(crate) fn texts(w: &Window) -> (Option<String>, Option<String>) {
    let above = w.line_above.then(|| match w.below {
        b if b > 0 && !w.line_below => format!("+{} above, +{b} below (k/j)", w.above),
        _ => format!("+{} above (k)", w.above),
    });
    let below = w.line_below.then(|| match w.above {
        a if a > 0 && !w.line_above => format!("+{a} above, +{} below (k/j)", w.below),
        _ => format!("+{} below (j)", w.below),
    });
    (above, below)
}

/// `window` without indicator lines: the rows fill all `rows` lines (for a list so short
/// that a line of its own would cost half of it; the caller counts the hidden ones elsewhere).
pub(crate) fn plain(n: usize, selected: usize, rows: usize) -> Window {
    let shown = n.min(rows);
    let first = selected
        .min(n.saturating_sub(1))
        .saturating_sub(shown.saturating_sub(1));
    Window {
        first,
        shown,
        above: first,
        below: n - first - shown,
        line_above: false,
        line_below: false,
    }
}

/// A rule across `area`'s first line with `text` at its right end: reads as "the list
/// goes on" (above or below).
pub(crate) fn indicator(area: Rect, text: &str, buf: &mut Buffer, theme: &Theme) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let t = format!(" {text} ");
    let w = usize::from(area.width);
    let tw = t.chars().count().min(w);
    let rule = w - tw;
    buf.set_string(
        area.x,
        area.y,
        theme.hline().to_string().repeat(rule),
        theme.dim(),
    );
    buf.set_stringn(area.x + rule as u16, area.y, t, tw, theme.warn());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (first, shown, above, below, line above, line below)
    fn v(x: Window) -> (usize, usize, usize, usize, bool, bool) {
        (
            x.first,
            x.shown,
            x.above,
            x.below,
            x.line_above,
            x.line_below,
        )
    }

    #[test]
    fn a_list_that_fits_has_no_indicators() {
        assert_eq!(v(window(3, 2, 5)), (0, 3, 0, 0, false, false));
        assert_eq!(v(window(5, 4, 5)), (0, 5, 0, 0, false, false));
    }

    #[test]
    fn hidden_rows_are_counted_at_the_end_they_are_hidden_at() {
        // 10 rows in 5 lines: top, middle, bottom.
        assert_eq!(v(window(10, 0, 5)), (0, 4, 0, 6, false, true));
        assert_eq!(v(window(10, 3, 5)), (0, 4, 0, 6, false, true));
        assert_eq!(v(window(10, 4, 5)), (2, 3, 2, 5, true, true));
        assert_eq!(v(window(10, 7, 5)), (5, 3, 5, 2, true, true));
        assert_eq!(v(window(10, 8, 5)), (6, 4, 6, 0, true, false));
        // Moving down one row scrolls by at most one row once scrolling has begun.
        for sel in 5..9 {
            let (a, b) = (window(10, sel, 5), window(10, sel + 1, 5));
            assert!(b.first - a.first <= 1, "{sel}: {a:?} {b:?}");
        }
        for rows in 2..12 {
            for sel in 0..10 {
                let x = window(10, sel, rows);
                let lines = x.shown + usize::from(x.line_above) + usize::from(x.line_below);
                assert!(x.first <= sel && sel < x.first + x.shown, "{sel}: {x:?}");
                assert_eq!(x.above + x.shown + x.below, 10, "{sel}: {x:?}");
                assert!(lines <= rows, "{rows} {sel}: {x:?}");
                assert!(
                    x.above == 0 || x.line_above || rows < 3,
                    "{rows} {sel}: {x:?}"
                );
                assert!(
                    x.below == 0 || x.line_below || rows < 3,
                    "{rows} {sel}: {x:?}"
                );
            }
        }
    }

    #[test]
    fn plain_windows_fill_their_lines() {
        assert_eq!(v(plain(4, 2, 2)), (1, 2, 1, 1, false, false));
        assert_eq!(v(plain(4, 0, 2)), (0, 2, 0, 2, false, false));
        assert_eq!(v(plain(1, 0, 2)), (0, 1, 0, 0, false, false));
    }

    #[test]
    fn too_few_lines_for_both_still_show_the_selection() {
        assert_eq!(v(window(10, 6, 2)), (6, 1, 6, 3, false, true));
        assert_eq!(
            texts(&window(10, 6, 2)),
            (None, Some("+6 above, +3 below (k/j)".to_string()))
        );
        assert_eq!(v(window(10, 9, 2)), (9, 1, 9, 0, true, false));
        assert_eq!(v(window(10, 0, 2)), (0, 1, 0, 9, false, true));
        assert_eq!(v(window(10, 4, 1)), (4, 1, 4, 5, false, false));
    }
}
