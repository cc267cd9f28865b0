//! The selected alert drawn as a chart in the rows the alerts panel has left under its
//! text: the evidence series (the per-epoch floor of a leak) on a value axis with units,
//! epoch ticks under it, and the forecast as a dotted line up to the limit it will hit.
//! An alert without a series (grab-all, an OOM) gets its process's memory over the zoom
//! instead, so the space is never left empty while there is something to show.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::chart::{Col, Grid, Scale, extent, sample};
use super::paint::Painter;
use super::plot::{self, Kind, Plot, Trace, slots_per_cell};
use super::theme::Theme;
use crate::fmt::human;
use crate::model::alerts::{Alert, Forecast, StepUnit};
use crate::tui::app::App;

/// Rows a chart needs to say anything: legend, three rows of plot, the epoch axis.
pub(crate) const MIN_ROWS: u16 = 5;

/// Whether there is a chart for `a`: its evidence series, or its process's memory.
pub(crate) fn has_chart(a: &Alert, app: Option<&App>) -> bool {
    a.evidence.points.len() >= 2 || process_of(a, app).is_some()
}

fn process_of<'a>(
    a: &Alert,
    app: Option<&'a App>,
) -> Option<(
    &'a crate::model::state::ProcState,
    &'a crate::model::state::ProcGpu,
)> {
    let s = app?.view_state();
    let pr = s.procs.get(&a.pid?)?;
    Some((pr, pr.gpus.get(&a.gpu)?))
}

/// The panel's text lines for `a` and the rows its chart gets under them (0: no chart).
/// The chart takes every row the whole text leaves (a blank one between), and stands for
/// the one-row sparkline of the evidence, which is then left out of the text.
pub(crate) fn place(
    mut lines: Vec<Line<'static>>,
    a: &Alert,
    app: Option<&App>,
    name: &str,
    width: u16,
    rows: u16,
) -> (Vec<Line<'static>>, u16) {
    if !has_chart(a, app) {
        return (lines, 0);
    }
    let count = |l: &[Line<'static>]| {
        Paragraph::new(l.to_vec())
            .wrap(Wrap { trim: true })
            .line_count(width)
    };
    let spark = format!("{name} ");
    let full = lines.clone();
    // The sparkline row: the series' name, then the sparkline (after the subject and the
    // `raised …` line, which may wrap).
    if a.evidence.points.len() >= 2
        && let Some(at) = lines
            .iter()
            .take(6)
            .position(|l| l.spans.len() >= 2 && l.spans[0].content == spark)
    {
        lines.remove(at);
    }
    let free = rows.saturating_sub(count(&lines) as u16);
    // One blank row between text and chart, when there is one to spare.
    match free {
        f if f > MIN_ROWS => (lines, f - 1),
        f if f == MIN_ROWS => (lines, f),
        _ => (full, 0),
    }
}

/// Draw the chart of `a` into `area` (at least `MIN_ROWS` high); `name` is its evidence
/// series as the panel calls it (`floor`).
pub(crate) fn render(
    buf: &mut Buffer,
    area: Rect,
    (a, name): (&Alert, &str),
    app: Option<&App>,
    theme: &Theme,
) {
    if area.height < MIN_ROWS || area.width < 20 {
        return;
    }
    if a.evidence.points.len() >= 2 {
        evidence_chart(buf, area, a, name, theme);
    } else if let (Some(app), Some((pr, pg))) = (app, process_of(a, app)) {
        let total = app.view_state().gpu(a.gpu).map_or(0, |g| g.total());
        let legend = Rect { height: 1, ..area };
        let text = format!(
            "PID {} on GPU {}: used (NVML) over the zoom, peak {}",
            pr.info.pid,
            a.gpu,
            human(pg.peak.value)
        );
        buf.set_stringn(area.x, area.y, text, usize::from(legend.width), theme.dim());
        let chart = Rect {
            y: area.y + 1,
            height: area.height - 1,
            ..area
        };
        process_chart(buf, chart, pr.first_seen, pg, total, app, theme);
    }
}

/// The process's NVML usage over the zoom, with its peak and the card's total as
/// references: what an alert without a series (grab-all, an OOM) was about.
fn process_chart(
    buf: &mut Buffer,
    area: Rect,
    first: crate::model::time::Ts,
    pg: &crate::model::state::ProcGpu,
    total: u64,
    app: &App,
    theme: &Theme,
) {
    let areas = plot::split(area, true);
    let n = usize::from(areas.plot.width) * slots_per_cell(theme);
    let grid = Grid::window(app.view_state().now, Some(first), app.window(), n.max(1));
    let cols = sample(&pg.used, &grid);
    let (lo, hi) = extent(&cols).unwrap_or((0.0, 0.0));
    let scale = Scale::fit(lo, hi, areas.plot.height, None, total as f64);
    let plot = Plot {
        grid,
        scale,
        traces: vec![Trace {
            cols: &cols,
            kind: Kind::Area,
            style: theme.used(),
            ascii: '#',
        }],
        refs: vec![
            (total as f64, theme.error()),
            (pg.peak.value as f64, theme.peak()),
        ],
    };
    plot::render(
        &mut Painter::new(buf),
        &areas,
        &plot,
        app.window_label(),
        theme,
    );
}

/// The x range the chart shows: the evidence, and the forecast up to the limit when it is
/// within four times the evidence's length (further, the evidence would be a sliver; the
/// legend then says where the limit is).
fn x_range(a: &Alert) -> (i64, i64, Option<&Forecast>) {
    let pts = &a.evidence.points;
    let (x0, x1) = (pts[0].x, pts[pts.len() - 1].x);
    let f = a
        .evidence
        .forecast
        .as_ref()
        .filter(|f| f.steps < 1e6 && f.rate > 0.0);
    let reach = (4 * (x1 - x0)).max(4);
    let x_end = match f {
        Some(f) => x1 + (f.steps.ceil() as i64).clamp(1, reach),
        None => x1,
    };
    (x0, x_end.max(x0 + 1), f)
}

/// Per slot: the evidence value of the point at or before the slot's x (a step line), and
/// the forecast from the last point on, up to where it meets the ceiling.
fn columns(a: &Alert, n: usize) -> (Vec<Col>, Vec<Col>, i64, i64) {
    let pts = &a.evidence.points;
    let (x0, x_end, f) = x_range(a);
    let x1 = pts[pts.len() - 1].x;
    let width = (x_end - x0 + 1) as f64;
    let x_at = |i: usize| x0 as f64 - 0.5 + (i as f64 + 0.5) * width / n as f64;
    let mut ev = vec![Col::None; n];
    let mut fc = vec![Col::None; n];
    for (i, (e, c)) in ev.iter_mut().zip(fc.iter_mut()).enumerate() {
        let x = x_at(i);
        if x <= x1 as f64 + 0.5 {
            let at = x.round() as i64;
            if let Some(p) = pts.iter().rev().find(|p| p.x <= at) {
                *e = Col::Val(p.bytes as f64);
            }
        }
        if let Some(f) = f {
            let from = x1 as f64;
            if x >= from {
                let v = f.current as f64 + f.rate * (x - from);
                *c = Col::Val(v.min(f.ceiling as f64));
            }
        }
    }
    // The forecast stops where it meets the ceiling.
    if let Some(hit) = fc
        .iter()
        .position(|c| f.is_some_and(|f| c.val() == Some(f.ceiling as f64)))
    {
        for c in fc.iter_mut().skip(hit + 1) {
            *c = Col::None;
        }
    }
    (ev, fc, x0, x_end)
}

fn evidence_chart(buf: &mut Buffer, area: Rect, a: &Alert, name: &str, theme: &Theme) {
    let ev = &a.evidence;
    let legend = Rect { height: 1, ..area };
    let chart = Rect {
        y: area.y + 1,
        height: area.height - 2,
        ..area
    };
    let axis_row = Rect {
        y: area.bottom() - 1,
        height: 1,
        ..area
    };
    let areas = plot::split(chart, false);
    let n = usize::from(areas.plot.width) * slots_per_cell(theme);
    let (evc, fcc, x0, x_end) = columns(a, n.max(1));
    let (_, _, forecast) = x_range(a);
    let vals = evc.iter().chain(&fcc).filter_map(|c| c.val());
    let (lo, hi) = vals.fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    let scale = Scale::fit(lo, hi, areas.plot.height, None, 0.0);
    let per = match ev.unit {
        Some(StepUnit::Epoch) => "/ep",
        _ => "",
    };
    let mut traces = vec![Trace {
        cols: &evc,
        // ASCII lines have one level per row; bars have eight, enough to show the rise.
        kind: if theme.ascii { Kind::Area } else { Kind::Line },
        style: theme.floor(),
        ascii: name.chars().next().unwrap_or('*'),
    }];
    if forecast.is_some() {
        traces.push(Trace {
            cols: &fcc,
            kind: Kind::Dotted,
            style: theme.warn(),
            ascii: '.',
        });
    }
    let mut refs = Vec::new();
    if let Some(f) = forecast.filter(|f| (f.ceiling as f64) <= scale.hi) {
        refs.push((f.ceiling as f64, theme.error()));
    }
    // The legend: each series by the glyph it is drawn with, then what the forecast says.
    let mut pieces: Vec<Vec<Span<'static>>> = traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let what = match forecast {
                Some(f) if i > 0 => format!("peak forecast from {}", human(f.current)),
                _ => format!("{name}{per}"),
            };
            vec![
                Span::styled(plot::legend_mark(t, i == 0, theme), t.style),
                Span::raw(format!(" {what}  ")),
            ]
        })
        .collect();
    if let Some(f) = forecast {
        let at = match (ev.unit.as_ref(), f.at_epoch) {
            (Some(StepUnit::Epoch), Some(e)) => format!(" at e{}", e.ceil() as i64),
            _ => String::new(),
        };
        let off = if at_limit_shown(f, x_end, a) {
            ""
        } else {
            " (off the chart)"
        };
        pieces.push(vec![Span::styled(
            format!("limit {}{at}{off}", human(f.ceiling)),
            theme.error(),
        )]);
    }
    let line = super::text::whole_pieces(pieces, legend.width);
    let plot = Plot {
        grid: Grid {
            start: 0,
            step: 1,
            n: n.max(1),
        },
        scale,
        traces,
        refs,
    };
    line.render(legend, buf);
    let mut p = Painter::new(buf);
    plot::render(&mut p, &areas, &plot, "", theme);
    x_axis(buf, axis_row, areas.axis.width, (x0, x_end), a, theme);
}

/// Whether the chart reaches the step where the forecast meets the limit.
fn at_limit_shown(f: &Forecast, x_end: i64, a: &Alert) -> bool {
    let x1 = a.evidence.points.last().map_or(0, |p| p.x);
    x1 as f64 + f.steps <= x_end as f64 + 0.5
}

/// The x axis: `e40` at epoch ticks, or the clock time of a window.
fn x_axis(
    buf: &mut Buffer,
    area: Rect,
    axis_w: u16,
    (x0, x_end): (i64, i64),
    a: &Alert,
    theme: &Theme,
) {
    let (line, tick, corner) = if theme.ascii {
        ('-', '+', '+')
    } else {
        ('─', '┴', '└')
    };
    let plot_x = area.x + axis_w;
    let cells = area.right().saturating_sub(plot_x);
    if cells == 0 {
        return;
    }
    if axis_w > 0 {
        buf[(plot_x - 1, area.y)]
            .set_char(corner)
            .set_style(theme.dim());
    }
    for x in plot_x..area.right() {
        buf[(x, area.y)].set_char(line).set_style(theme.dim());
    }
    let pts = &a.evidence.points;
    let epochs = a.evidence.unit == Some(StepUnit::Epoch);
    // Time of step x, from the evidence's own pace (windows have no names but their times).
    let (p0, p1) = (&pts[0], &pts[pts.len() - 1]);
    let per = if p1.x > p0.x {
        (p1.t - p0.t) as f64 / (p1.x - p0.x) as f64
    } else {
        0.0
    };
    let label = |x: i64| {
        if epochs {
            format!("e{x}")
        } else {
            theme.clock(p0.t + (per * (x - p0.x) as f64) as i64)
        }
    };
    let width = (x_end - x0 + 1) as f64;
    let per_cell = width / f64::from(cells);
    let label_w = label(x_end).chars().count() + 2;
    let every = [
        1i64, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1_000, 10_000,
    ]
    .into_iter()
    .find(|e| *e as f64 >= label_w as f64 * per_cell)
    .unwrap_or(100_000);
    let mut x = x0.div_euclid(every) * every;
    if x < x0 {
        x += every;
    }
    while x <= x_end {
        let col = ((x - x0) as f64 + 0.5) / per_cell;
        let cx = plot_x + (col.floor() as u16).min(cells - 1);
        let text = label(x);
        if cx + 1 + text.chars().count() as u16 <= area.right() {
            buf[(cx, area.y)].set_char(tick).set_style(theme.dim());
            buf.set_string(cx + 1, area.y, text, theme.dim());
        }
        x += every;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alerts::Point;

    fn leak(points: usize, steps: f64) -> Alert {
        let mut a: Alert = serde_json::from_value(serde_json::json!({
            "kind": "growth", "severity": "warning", "pid": 786, "gpu": 1,
            "message": "m", "summary": "leak", "evidence": {"basis": "epochs"},
            "raised_at": 0, "updated_at": 0
        }))
        .expect("alert");
        a.evidence.unit = Some(StepUnit::Epoch);
        a.evidence.points = (0..points as i64)
            .map(|i| Point {
                x: 32 + i,
                t: i * 3_000,
                bytes: (400 + 12 * i as u64) << 20,
            })
            .collect();
        let last = a.evidence.points.last().expect("points").bytes;
        a.evidence.forecast = Some(Forecast {
            ceiling: last + (steps * 12.0) as u64 * (1 << 20),
            ceiling_source: crate::model::alerts::CeilingSource::AllocatorLimit,
            current: last,
            rate: 12.0 * 1_048_576.0,
            steps,
            ms: None,
            at_epoch: Some(32.0 + points as f64 - 1.0 + steps),
        });
        a
    }

    #[test]
    fn the_forecast_reaches_the_limit_when_it_is_near() {
        let a = leak(20, 30.0);
        let (ev, fc, x0, x_end) = columns(&a, 100);
        assert_eq!((x0, x_end), (32, 81));
        let ceiling = a.evidence.forecast.as_ref().expect("forecast").ceiling as f64;
        assert_eq!(
            fc.iter().filter_map(|c| c.val()).fold(0.0, f64::max),
            ceiling
        );
        // The evidence is a rising step line over the first part, the forecast after it.
        let e: Vec<f64> = ev.iter().filter_map(|c| c.val()).collect();
        assert!(e.windows(2).all(|w| w[1] >= w[0]) && e.len() > 30, "{e:?}");
        assert!(fc.iter().take(35).all(|c| c.val().is_none()));
    }

    #[test]
    fn a_far_limit_is_off_the_chart_and_said() {
        let a = leak(10, 500.0);
        let (_, fc, x0, x_end) = columns(&a, 80);
        assert_eq!(x_end - 41, 36, "four times the evidence");
        let f = a.evidence.forecast.as_ref().expect("forecast");
        assert!(!at_limit_shown(f, x_end, &a));
        assert!(
            fc.iter()
                .filter_map(|c| c.val())
                .all(|v| v < f.ceiling as f64)
        );
        assert_eq!(x0, 32);
    }
}
