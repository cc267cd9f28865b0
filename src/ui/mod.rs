//! Rendering: pure functions of `App`, no I/O, no mutation.

pub mod alerts;
pub mod allocator;
pub mod chart;
pub mod detail;
pub mod help;
pub mod legend;
pub mod overview;
pub mod procs;
pub mod status;
pub mod theme;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};

use crate::app::{App, View};
use theme::Theme;

/// Smallest area gpumon draws into; below it says so instead of drawing garbage.
pub const MIN_SIZE: (u16, u16) = (20, 5);

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let buf = f.buffer_mut();
    app.hits.borrow_mut().clear();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!("gpumon: {}x{} too small", area.width, area.height);
        buf.set_stringn(area.x, area.y, msg, usize::from(area.width), theme.warn());
        return;
    }
    // The alert bar has its own line on every screen, even in a 40x12 pane.
    let [header, body, bar, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    status::render_header(app, header, buf, theme);
    match app.view {
        View::Overview => overview::render_overview(app, body, buf, theme),
        View::Detail => detail::render_detail(app, body, buf, theme),
        View::Alerts => alerts::render_panel(app, body, buf, theme),
    }
    let active = app.pipe.alerts.active();
    let silenced = active.iter().filter(|a| a.silenced).count();
    let visible: Vec<_> = active.into_iter().filter(|a| !a.silenced).collect();
    alerts::render_alert_bar(&visible, silenced, bar, buf, theme);
    status::render_footer(app, footer, buf, theme);
    if app.help {
        help::render_help(app, body, buf, theme);
    }
}
