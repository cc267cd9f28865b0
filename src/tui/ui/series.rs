//! Which series the process chart shows (key `v`): every one, or one alone on a scale
//! fitted to it, so a leak of a few MiB per epoch in the floor fills the chart instead of
//! being a dot among GiB-high lines; and the legend piece that says so.

use ratatui::text::Span;

use super::plot::{Kind, Trace};
use super::theme::Theme;
use crate::tui::app::Solo;

/// The letter the chart marks series with (`Trace::ascii`).
fn mark_of(s: Solo) -> Option<char> {
    match s {
        Solo::All => None,
        Solo::Floor => Some('f'),
        Solo::Used => Some('#'),
        Solo::Reserved => Some('r'),
        Solo::Allocated => Some('a'),
        Solo::Peak => Some('p'),
    }
}

/// Keep only the series `s` asks for. Returns false when the process has no such series
/// (no companion, no epochs yet): then every series stays, and the legend says why.
pub(crate) fn solo(traces: &mut Vec<Trace>, s: Solo) -> bool {
    let Some(mark) = mark_of(s) else {
        return true;
    };
    let Some(mut t) = traces.iter().copied().find(|t| t.ascii == mark) else {
        return false;
    };
    // Alone, NVML's usage is an area again: nothing is under it to hide.
    t.kind = if mark == '#' { Kind::Area } else { Kind::Line };
    *traces = vec![t];
    true
}

/// The legend piece for the `v` state: `only floor/ep (v)` or `no floor/ep here (v)`.
pub(crate) fn solo_piece(found: bool, s: Solo, theme: &Theme) -> Option<Vec<Span<'static>>> {
    if s == Solo::All {
        return None;
    }
    let (text, style) = if found {
        (format!("only {} (v) ", s.name()), theme.title())
    } else {
        (format!("no {} here (v) ", s.name()), theme.warn())
    };
    Some(vec![Span::styled(text, style)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::ui::chart::Col;
    use ratatui::style::Style;

    fn trace(cols: &[Col], kind: Kind, ascii: char) -> Trace<'_> {
        Trace {
            cols,
            kind,
            style: Style::new(),
            ascii,
        }
    }

    #[test]
    fn one_series_alone_or_all_when_it_is_missing() {
        let c = [Col::Val(1.0)];
        let all = || {
            vec![
                trace(&c, Kind::Line, '#'),
                trace(&c, Kind::Line, 'a'),
                trace(&c, Kind::Line, 'f'),
            ]
        };
        let mut t = all();
        assert!(solo(&mut t, Solo::Floor));
        assert_eq!(t.iter().map(|t| t.ascii).collect::<String>(), "f");
        let mut t = all();
        assert!(solo(&mut t, Solo::Used));
        assert_eq!((t.len(), t[0].kind), (1, Kind::Area));
        let mut t = all();
        assert!(!solo(&mut t, Solo::Reserved));
        assert_eq!(t.len(), 3, "a missing series leaves every one drawn");
        let mut t = all();
        assert!(solo(&mut t, Solo::All));
        assert_eq!(t.len(), 3);
    }
}
