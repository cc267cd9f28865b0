//! Rendering: pure functions of `App`, no I/O, no mutation.

pub mod allocator;
pub mod chart;
pub mod detail;
pub mod help;
pub mod overview;
pub mod procs;
pub mod status;
pub mod theme;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};

use crate::app::{App, View};
use theme::Theme;

/// Smallest area gpumon draws into; below it says so instead of drawing garbage.
pub const MIN_SIZE: (u16, u16) = (20, 5);

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let buf = f.buffer_mut();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!("gpumon: {}x{} too small", area.width, area.height);
        buf.set_stringn(area.x, area.y, msg, usize::from(area.width), theme.warn());
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    status::render_header(app, header, buf, theme);
    match app.view {
        View::Overview => overview::render_overview(app, body, buf, theme),
        View::Detail => detail::render_detail(app, body, buf, theme),
        View::Alerts => overview::render_overview(app, body, buf, theme),
    }
    status::render_footer(app, footer, buf, theme);
    if app.help {
        help::render_help(body_with_margin(body), buf, theme);
    }
}

fn body_with_margin(r: Rect) -> Rect {
    r
}
