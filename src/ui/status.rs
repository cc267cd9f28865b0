//! Top status line (source, interval, host, freeze/replay state) and the bottom line.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::theme::Theme;
use crate::app::{App, SourceKind};
use crate::model::time::duration_label;

fn interval_label(ms: u64) -> String {
    if ms >= 1000 && ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

pub fn render_header(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let narrow = area.width < 60;
    let host = s.header.as_ref().map_or("", |h| h.host.as_str());
    let mut left = vec![Span::styled(" gpumon ", theme.header())];
    let sep = if theme.ascii { " | " } else { " │ " };
    if !narrow {
        left.push(Span::raw(format!(" {host}")));
        if let Some(d) = s.header.as_ref().and_then(|h| h.driver_version.as_ref()) {
            left.push(Span::styled(format!("{sep}driver {d}"), theme.dim()));
        }
    }
    match &app.source {
        SourceKind::Live { interval_ms } => {
            left.push(Span::raw(format!("{sep}{}", interval_label(*interval_ms))));
            left.push(Span::raw(sep.to_string()));
            left.push(Span::styled("LIVE", theme.used()));
        }
        SourceKind::Replay { file, demo } => {
            let what = if *demo { "DEMO RECORDING" } else { "RECORDING" };
            left.push(Span::raw(" "));
            left.push(Span::styled(format!(" {what} "), theme.recording()));
            if let Some(r) = &app.replay {
                let state = if r.paused {
                    "paused"
                } else if r.ended && !r.following {
                    "end"
                } else if r.ended {
                    "following"
                } else {
                    ""
                };
                left.push(Span::raw(format!(
                    " {} {}{}",
                    duration_label(r.pos.saturating_sub(r.start).min(i64::MAX / 2)),
                    r.speed.label(),
                    if state.is_empty() {
                        String::new()
                    } else {
                        format!(" {state}")
                    }
                )));
            }
            if !narrow {
                let name = std::path::Path::new(file)
                    .file_name()
                    .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
                left.push(Span::styled(format!("{sep}{name}"), theme.dim()));
            }
        }
    }
    if app.frozen.is_some() {
        left.push(Span::raw(" "));
        left.push(Span::styled(" FROZEN ", theme.warn()));
    }
    left.push(Span::styled(
        format!("{sep}{}", app.window_label()),
        theme.dim(),
    ));
    let help = if narrow { "?" } else { "? help" };
    let help_w = help.len() as u16 + 1;
    let left_area = Rect {
        width: area.width.saturating_sub(help_w + 1),
        ..area
    };
    Line::from(left).render(left_area, buf);
    let x = area.x + area.width.saturating_sub(help_w);
    buf.set_string(x, area.y, help, theme.dim());
}

/// Bottom line: the latest problem if any, else key hints.
pub fn render_footer(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    if let Some(m) = s.last_problem().filter(|m| s.now - m.t < 60_000) {
        let text = format!("{} {}: {}", theme.warn_sign(), m.source, m.text);
        buf.set_stringn(area.x, area.y, text, usize::from(area.width), theme.error());
        return;
    }
    let hints = if area.width < 60 {
        "q quit  ? help  Tab GPU  Enter detail"
    } else if app.is_replay() {
        "q quit  ? help  Tab GPU  Enter detail  space pause  </> speed  [/] seek"
    } else {
        "q quit  ? help  Tab GPU  Enter detail  a alerts  p freeze  +/- zoom"
    };
    buf.set_stringn(area.x, area.y, hints, usize::from(area.width), theme.dim());
}
