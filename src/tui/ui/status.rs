//! Top status line (source, interval, host, freeze/record/replay state with position,
//! length, progress and the recording's clock) and the bottom line (prompt, result, hints).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::legend;
use super::theme::Theme;
use crate::tui::app::{App, Prompt, SourceKind};

/// The header's pieces, most important first: when the line is too narrow the least
/// important are dropped whole instead of being cut mid-word.
fn replay_spans(app: &App, theme: &Theme, narrow: bool) -> Vec<(u8, Vec<Span<'static>>)> {
    let mut out = Vec::new();
    let SourceKind::Replay { demo, .. } = &app.source else {
        return out;
    };
    let what = if *demo {
        legend::REPLAY.sym.replace("REPLAY", "DEMO REPLAY")
    } else {
        legend::REPLAY.sym.to_string()
    };
    out.push((
        0,
        vec![
            Span::raw(" "),
            Span::styled(format!(" {what} "), theme.recording()),
        ],
    ));
    let Some(r) = &app.replay else { return out };
    let pos = r.pos.saturating_sub(r.start);
    let total = r.end.map(|e| e.saturating_sub(r.start));
    let hours = total.unwrap_or(pos) >= 3_600_000;
    let sep = if narrow { "/" } else { " / " };
    let time = match total {
        Some(t) => format!(
            " {}{sep}{}",
            crate::fmt::clock_pos(pos, hours),
            crate::fmt::clock_pos(t, hours)
        ),
        None => format!(" {}", crate::fmt::clock_pos(pos, hours)),
    };
    out.push((0, vec![Span::raw(time)]));
    if let Some(t) = total.filter(|&t| t > 0) {
        let w = 10usize;
        let fill = ((pos as f64 / t as f64).clamp(0.0, 1.0) * w as f64).round() as usize;
        out.push((
            3,
            vec![
                Span::raw(" "),
                Span::styled(theme.full().to_string().repeat(fill), theme.used()),
                Span::styled(theme.empty().to_string().repeat(w - fill), theme.dim()),
            ],
        ));
    }
    out.push((
        4,
        vec![Span::styled(
            format!(" {}", theme.clock(r.pos)),
            theme.dim(),
        )],
    ));
    let speed = app.speed().unwrap_or(r.speed).label();
    out.push((1, vec![Span::raw(format!(" {speed}"))]));
    let state = match (r.ended && !r.following, r.paused) {
        // Paused at the end changes nothing visible; a narrow header says just `end`.
        (true, true) if narrow => "end",
        (true, true) => "end (paused)",
        (true, false) => "end",
        (false, true) => "paused",
        (false, false) if r.ended => "following",
        _ => "",
    };
    if !state.is_empty() {
        out.push((0, vec![Span::styled(format!(" {state}"), theme.warn())]));
    }
    if r.looping {
        out.push((2, vec![Span::styled(" loop", theme.dim())]));
    }
    out
}

/// Priority of the recording's file name in the header (the first to give way).
const FILE: u8 = 8;

pub(crate) fn render_header(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let narrow = area.width < 60;
    let host = s.header.as_ref().map_or("", |h| h.host.as_str());
    let sep = if theme.ascii { " | " } else { " │ " };
    // (priority, spans): 0 always stays; higher numbers go first when space runs out.
    let mut parts: Vec<(u8, Vec<Span<'static>>)> =
        vec![(0, vec![Span::styled(" gpumon ", theme.header())])];
    parts.push((6, vec![Span::raw(format!(" {host}"))]));
    if let Some(d) = s.header.as_ref().and_then(|h| h.driver_version.as_ref()) {
        parts.push((
            7,
            vec![Span::styled(format!("{sep}driver {d}"), theme.dim())],
        ));
    }
    match &app.source {
        SourceKind::Live { interval_ms } => {
            parts.push((
                5,
                vec![Span::raw(format!(
                    "{sep}{}",
                    crate::fmt::interval(*interval_ms)
                ))],
            ));
            parts.push((
                0,
                vec![
                    Span::raw(sep.to_string()),
                    Span::styled("LIVE", theme.used()),
                ],
            ));
        }
        SourceKind::Prometheus { url } => {
            let stale = app.fleet.as_deref().and_then(|fv| {
                let n = fv.fleet.nodes.get(fv.open.as_ref()?)?;
                n.stale_ms(fv.fleet.at)
            });
            if let Some(ms) = stale {
                parts.push((
                    0,
                    vec![Span::styled(
                        format!(" STALE {}", crate::fmt::duration(ms)),
                        theme.warn(),
                    )],
                ));
            }
            let down = app
                .fleet
                .as_deref()
                .is_some_and(|fv| fv.status.error.is_some());
            parts.push((
                0,
                vec![
                    Span::raw(sep.to_string()),
                    if down {
                        Span::styled("PROMETHEUS DOWN", theme.error())
                    } else {
                        Span::styled("PROMETHEUS", theme.used())
                    },
                ],
            ));
            parts.push((FILE, vec![Span::styled(format!("{sep}{url}"), theme.dim())]));
        }
        SourceKind::Replay { file, .. } => {
            parts.extend(replay_spans(app, theme, narrow));
            let name = std::path::Path::new(file)
                .file_name()
                .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
            parts.push((
                FILE,
                vec![Span::styled(format!("{sep}{name}"), theme.dim())],
            ));
        }
    }
    if app.frozen.is_some() {
        parts.push((
            0,
            vec![
                Span::raw(" "),
                Span::styled(format!(" {} ", legend::FROZEN.sym), theme.warn()),
            ],
        ));
    }
    if app.recording.is_some() {
        let rec = legend::REC.sym(theme.ascii);
        parts.push((
            0,
            vec![
                Span::raw(" "),
                Span::styled(format!(" {rec} "), theme.error()),
            ],
        ));
    }
    // The node list has no time axis: no span to name.
    if app.view != crate::tui::app::View::Nodes {
        parts.push((
            2,
            vec![Span::styled(
                format!("{sep}{}", app.window_label()),
                theme.dim(),
            )],
        ));
    }
    let help = if narrow { "?" } else { "? help" };
    let help_w = help.len() as u16 + 1;
    let room = usize::from(area.width.saturating_sub(help_w + 1));
    let width = |p: &[(u8, Vec<Span>)]| -> usize {
        p.iter()
            .flat_map(|(_, v)| v.iter())
            .map(|s| s.width())
            .sum()
    };
    while width(&parts) > room {
        let Some(worst) = parts.iter().map(|(p, _)| *p).max().filter(|&p| p > 0) else {
            break;
        };
        let i = parts.iter().rposition(|(p, _)| *p == worst).unwrap_or(0);
        // The file name is shortened before it is dropped: its start tells files apart.
        let excess = width(&parts) - room;
        let part_w: usize = parts[i].1.iter().map(|s| s.width()).sum();
        if worst == FILE && part_w >= excess + 12 {
            let span = &mut parts[i].1[0];
            let keep: String = span.content.chars().take(part_w - excess - 1).collect();
            span.content = format!("{keep}{}", if theme.ascii { "~" } else { "…" }).into();
            continue;
        }
        parts.remove(i);
    }
    let left: Vec<Span> = parts.into_iter().flat_map(|(_, v)| v).collect();
    let left_area = Rect {
        width: area.width.saturating_sub(help_w + 1),
        ..area
    };
    super::put::line(&Line::from(left), left_area, buf);
    let x = area.x + area.width.saturating_sub(help_w);
    super::put::string(buf, x, area.y, help, theme.dim());
}

/// Bottom line: an open prompt, else what the last key did, else the latest problem,
/// else key hints.
pub(crate) fn render_footer(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let w = usize::from(area.width);
    if let Some(p) = &app.prompt {
        let text = match p {
            Prompt::Filter if app.view == crate::tui::app::View::Nodes => format!(
                "select nodes (node=, job=, user=, words): {}{}  Enter keeps, Esc clears",
                app.fleet
                    .as_deref()
                    .map_or("", |f| f.selector_text.as_str()),
                if theme.ascii { "_" } else { "█" }
            ),
            Prompt::Filter => format!(
                "filter (name, user or PID): {}{}  Enter keeps, Esc clears",
                app.filter,
                if theme.ascii { "_" } else { "█" }
            ),
            Prompt::AckAll(1) => "acknowledge the 1 alert? y: yes, any other key: no".into(),
            Prompt::AckAll(n) => format!("acknowledge all {n} alerts? y: yes, any other key: no"),
            Prompt::Signal { sig, what, .. } => format!(
                "send {} to {what}? y: yes, any other key: no",
                crate::tui::signal::name(*sig)
            ),
        };
        super::put::stringn(buf, area.x, area.y, text, w, theme.title());
        return;
    }
    if let Some(f) = &app.flash {
        super::put::stringn(buf, area.x, area.y, f, w, theme.warn());
        return;
    }
    let s = app.view_state();
    if let Some(m) = s.last_problem().filter(|m| s.now - m.t < 60_000) {
        let text = format!("{} {}: {}", theme.warn_sign(), m.source, m.text);
        super::put::stringn(buf, area.x, area.y, text, w, theme.error());
        return;
    }
    let hints = if app.view == crate::tui::app::View::Nodes {
        if area.width < 60 {
            "q quit ? help Enter open / select"
        } else {
            "q quit  ? help  Enter open node  / select  s sort  I invert  J jobs"
        }
    } else if app.is_fleet() && area.width >= 60 {
        "q quit  ? help  Esc nodes  Enter detail  a alerts  s sort  / filter"
    } else if area.width < 60 {
        "q quit  ? help  Tab GPU  Enter detail"
    } else if app.is_replay() {
        "q quit ? help Enter detail a alerts space pause </> speed [/] seek {/} marks"
    } else {
        "q quit  ? help  Enter detail  a alerts  s sort  / filter  x kill  p freeze"
    };
    super::put::stringn(buf, area.x, area.y, hints, w, theme.dim());
}
