//! The detail view without NVML (no driver, or `--gpu` left no card) while companions
//! report: the selected companion's allocator over time (reserved, allocated, the epoch
//! floor and peak, from its own samples) and its allocator panel (policy, split, F,
//! OOMs, free blocks). There is no card to hang it on, so its title names the process.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use super::allocator::{AllocView, panel_lines, render_process_alloc};
use super::chart::{Grid, Scale, extent, sample};
use super::paint::Painter;
use super::plot::{self, Kind, Plot, Trace, slots_per_cell};
use super::theme::Theme;
use crate::fmt::human;
use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::tui::app::App;

/// The companion the selection points at: the selected PID, else the row's.
fn selected(app: &App) -> Option<&ProcAlloc> {
    let s = app.view_state();
    let pids = app.pids();
    let pid = app.sel_pid.filter(|p| pids.contains(p)).or_else(|| {
        pids.get(app.proc_row.min(pids.len().saturating_sub(1)))
            .copied()
    })?;
    s.companions.latest(pid)
}

pub(crate) fn render(p: &mut Painter, app: &App, area: Rect, theme: &Theme) {
    let Some(pa) = selected(app) else {
        p.paint("no companion", |buf| {
            buf.set_stringn(
                area.x,
                area.y,
                "no companion connected: nothing to show in detail (Esc: back)",
                usize::from(area.width),
                theme.dim(),
            )
        });
        return;
    };
    // The device with the newest sample: the one the program works on now.
    let dev = pa.devices.values().max_by_key(|d| d.last_t);
    let dot = theme.dot();
    // Whole pieces only: the title drops its last parts rather than cut one.
    let mut pieces = vec![
        format!(" PID {} ", pa.pid),
        format!("{dot} {} ", super::policy::framework_label(pa)),
    ];
    if let Some(d) = dev {
        pieces.push(format!("{dot} cuda:{} ", d.dev));
        pieces.push(format!("{dot} no NVML: the companion's view "));
    }
    let room = usize::from(area.width.saturating_sub(2));
    let mut title = String::new();
    for piece in pieces {
        if title.chars().count() + piece.chars().count() > room {
            break;
        }
        title.push_str(&piece);
    }
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(title)
        .title_style(theme.title());
    let inner = block.inner(area);
    p.paint("detail border", |buf| block.render(area, buf));
    if inner.height < 3 || inner.width < 10 {
        return;
    }
    let view = AllocView {
        nvml_used: None,
        nvml_peak: None,
        proc: pa,
        dev,
        exit: None,
        risk: super::alerts::frag_risk(app, pa.pid, dev.map_or(0, |d| d.dev)),
        // A grab is judged from NVML's listing, which this process is not in.
        grab: None,
        now: app.view_state().now,
    };
    // The chart keeps at least half; the panel gets what its lines want of the rest.
    let want = panel_lines(&view, inner.width, inner.height, theme).len() as u16;
    let panel_h = want.min(inner.height / 2);
    let chart_ok = dev.is_some_and(|d| !d.allocated.is_empty());
    let [legend, chart, panel] = Layout::vertical([
        Constraint::Length(u16::from(chart_ok)),
        Constraint::Min(if chart_ok { 3 } else { 0 }),
        Constraint::Length(if chart_ok { panel_h } else { inner.height }),
    ])
    .areas(inner);
    if let (Some(d), true) = (dev, chart_ok) {
        companion_chart(p, app, d, pa.first_seen, legend, chart, theme);
    }
    p.paint("allocator panel", |buf| {
        render_process_alloc(panel, buf, &view, theme)
    });
}

/// Reserved (an area: what the allocator holds from CUDA), allocated over it, and the
/// epoch floor and peak when epochs are marked.
fn companion_chart(
    p: &mut Painter,
    app: &App,
    d: &DevAlloc,
    first: crate::model::time::Ts,
    legend: Rect,
    chart: Rect,
    theme: &Theme,
) {
    let s = app.view_state();
    let areas = plot::split(chart, chart.height >= 3);
    let n = usize::from(areas.plot.width) * slots_per_cell(theme);
    // The chart spans the companion's life so far when that is shorter than the zoom.
    let first = Some(first);
    let grid = Grid::window(s.now, first, app.window(), n.max(1));
    let reserved = sample(&d.reserved, &grid);
    let alloc = sample(&d.allocated, &grid);
    let floor = super::detail::epoch_steps(d, &grid, |e| e.floor);
    let peak = super::detail::epoch_steps(d, &grid, |e| e.peak);
    let mut traces = Vec::new();
    for (cols, kind, style, ch) in [
        (&reserved, Kind::Area, theme.reserved(), 'r'),
        (&alloc, Kind::Line, theme.allocated(), 'a'),
        (&floor, Kind::Line, theme.floor(), 'f'),
        (&peak, Kind::Line, theme.peak(), 'p'),
    ] {
        if cols.iter().any(|c| c.val().is_some()) {
            traces.push(Trace {
                cols,
                kind,
                style,
                ascii: ch,
            });
        }
    }
    // With allocator lines over it, reserved is a line too: an area would hide them.
    if traces.len() > 1 {
        traces[0].kind = Kind::Line;
    }
    let (lo, hi) = traces
        .iter()
        .filter_map(|t| extent(t.cols))
        .fold((f64::MAX, 0.0f64), |(a, b), (lo, hi)| {
            (a.min(lo), b.max(hi))
        });
    let lo = if lo == f64::MAX { 0.0 } else { lo };
    // No card total without NVML: the allocator's limit, if it has one, caps the axis.
    let cap = d.limit().map_or(0.0, |l| l as f64);
    let scale = Scale::fit(lo, hi, areas.plot.height, None, cap);
    let mut refs = Vec::new();
    if let Some(l) = d.limit().filter(|l| (*l as f64) <= scale.hi) {
        refs.push((l as f64, theme.warn()));
    }
    let mut pieces = Vec::new();
    for t in &traces {
        let (mark, name) = match t.ascii {
            'r' if t.kind == Kind::Area => ('█', "resv"),
            'r' => ('━', "resv"),
            'a' => ('━', "alloc"),
            'f' => ('━', "floor/ep"),
            _ => ('━', "peak/ep"),
        };
        let mark = if theme.ascii { t.ascii } else { mark };
        pieces.push(vec![
            Span::styled(mark.to_string(), t.style),
            Span::raw(format!(" {name}  ")),
        ]);
    }
    if let Some(v) = d.peak_reserved() {
        pieces.push(vec![Span::styled(
            format!("peak resv {} ", human(v)),
            theme.peak(),
        )]);
    }
    let line: Line = super::text::whole_pieces(pieces, legend.width);
    p.paint("chart legend", |buf| line.render(legend, buf));
    let plot = Plot {
        grid,
        scale,
        traces,
        refs,
    };
    plot::render(p, &areas, &plot, app.window_label(), theme);
}
