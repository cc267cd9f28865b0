//! Rendering: pure functions of `App`, no I/O, no mutation. Every piece is drawn through
//! `paint::Painter` under a name, so tests can prove no two pieces share a cell.

pub(crate) mod alert_chart;
pub mod alerts;
pub(crate) mod alloc_brief;
pub(crate) mod allocator;
mod boxed;
pub(crate) mod cards;
pub(crate) mod chart;
pub(crate) mod companion_detail;
pub(crate) mod detail;
pub(crate) mod help;
pub(crate) mod job_row;
pub mod legend;
pub(crate) mod nodes;
pub(crate) mod overview;
pub mod paint;
pub(crate) mod plot;
pub(crate) mod policy;
pub mod proc_column;
pub mod procs;
pub(crate) mod put;
pub(crate) mod scroll;
pub(crate) mod series;
pub(crate) mod status;
pub(crate) mod text;
pub mod theme;
pub(crate) mod wrap;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout};

use crate::tui::app::{App, View};
use paint::Painter;
use theme::Theme;

/// Smallest area gpumon draws into; below it says so instead of drawing garbage.
pub const MIN_SIZE: (u16, u16) = (20, 5);

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    draw_buffer(f.buffer_mut(), app, theme);
}

/// The same, into a buffer the size of the screen (`tui::output::screen`).
pub fn draw_buffer(buf: &mut Buffer, app: &App, theme: &Theme) {
    let mut p = Painter::new(buf);
    draw_into(&mut p, app, theme);
}

/// Draw into `buf` with overlap checking: every cell two pieces both wrote, and the share
/// of the screen left empty (outside chart plots).
pub fn draw_checked(buf: &mut Buffer, app: &App, theme: &Theme) -> (Vec<String>, f64) {
    let mut p = Painter::checked(buf);
    draw_into(&mut p, app, theme);
    (p.clashes(), p.empty_share().unwrap_or(1.0))
}

fn draw_into(p: &mut Painter, app: &App, theme: &Theme) {
    let area = p.buf.area;
    app.hits.borrow_mut().clear();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!("gpumon: {}x{} too small", area.width, area.height);
        p.paint("too small", |buf| {
            put::row(buf, area, area.y, msg, theme.warn())
        });
        return;
    }
    // The alert bar has its own line on every screen, even in a 40x12 pane; a notice (why
    // a recording plays) gets its own line too, never the key hints' place.
    let notice_h = u16::from(app.notice.is_some() && area.height >= 10);
    let [header, notice, body, bar, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(notice_h),
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    p.paint("header", |buf| {
        status::render_header(app, header, buf, theme)
    });
    if let (Some(n), true) = (&app.notice, notice.height > 0) {
        let w = usize::from(notice.width);
        let text: String = if n.chars().count() <= w {
            n.clone()
        } else {
            let dots = if theme.ascii { "..." } else { "…" };
            let keep = w.saturating_sub(dots.chars().count());
            n.chars().take(keep).chain(dots.chars()).collect()
        };
        p.paint("notice", |buf| {
            put::row(buf, notice, notice.y, text, theme.warn())
        });
    }
    match app.view {
        View::Nodes => nodes::render(p, app, body, theme),
        View::Overview => overview::render_overview(p, app, body, theme),
        // No NVML: what the companions report is all there is.
        View::Detail if app.view_state().gpus.is_empty() => {
            companion_detail::render(p, app, body, theme)
        }
        View::Detail => detail::render_detail(p, app, body, theme),
        View::Alerts => alerts::paint_panel(p, app, body, theme),
    }
    if let (View::Nodes, Some(fv)) = (app.view, app.fleet.as_deref()) {
        p.paint("alert bar", |buf| {
            nodes::render_fleet_bar(fv, bar, buf, theme)
        });
        p.paint("footer", |buf| {
            status::render_footer(app, footer, buf, theme)
        });
        if app.help {
            p.overlay("help", |buf| help::render_help(app, body, buf, theme));
        }
        return;
    }
    let active = app.view_alerts().active();
    let silenced = active.iter().filter(|a| a.silenced).count();
    let visible: Vec<_> = active.into_iter().filter(|a| !a.silenced).collect();
    let past = alerts::PastAlerts::of(app);
    p.paint("alert bar", |buf| {
        alerts::render_alert_bar(&visible, silenced, past, bar, buf, theme)
    });
    app.hit(bar, crate::tui::app::Target::AlertBar);
    p.paint("footer", |buf| {
        status::render_footer(app, footer, buf, theme)
    });
    if app.help {
        p.overlay("help", |buf| help::render_help(app, body, buf, theme));
    }
}
