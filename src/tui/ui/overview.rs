//! Overview: every GPU at a glance. With few GPUs each is a card with a memory chart, its
//! processes (with column titles) and the allocator summary of companions; with many,
//! the others shrink to compact rows with a sparkline while the selected GPU keeps its
//! card (`cards.rs` decides the heights).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::cards::{Slot, Want, plan};
use super::chart::{Col, Grid, Scale, extent, sample, sparkline};
use super::paint::Painter;
use super::plot::{self, Kind, Plot, Trace, slots_per_cell};
use super::procs::{first_visible, proc_header, render_row};
use super::theme::Theme;
use crate::fmt::{gib1, human};
use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::model::state::{GpuState, ProcGpu, ProcState, State};
use crate::tui::app::App;

pub(crate) fn short_name(name: &str) -> &str {
    name.strip_prefix("NVIDIA ").unwrap_or(name)
}

/// `used 61.2 / 139.8 GiB ████░░░ peak 74.9 GiB (14:02) util 97% 45°C 300 W`, shortened to fit.
pub(crate) fn usage_line(g: &GpuState, width: u16, theme: &Theme) -> Line<'static> {
    let w = usize::from(width);
    let mut spans = Vec::new();
    if let Some(e) = g.error() {
        spans.push(Span::styled(
            format!("{} {e}", theme.warn_sign()),
            theme.error(),
        ));
        return Line::from(spans);
    }
    let total = g.total();
    let Some(used) = g.used_now() else {
        spans.push(Span::styled("no sample yet", theme.dim()));
        return Line::from(spans);
    };
    let frac = if total > 0 {
        used as f64 / total as f64
    } else {
        0.0
    };
    let last = g.last.as_ref();
    let util = last
        .and_then(|s| s.util)
        .map(|u| format!(" util {u:>3}%"))
        .unwrap_or_default();
    let temp = last
        .and_then(|s| s.temp_c)
        .map(|t| format!(" {t}°C"))
        .unwrap_or_default();
    let power = last
        .and_then(|s| s.power_mw)
        .map(|p| format!(" {} W", p / 1000))
        .unwrap_or_default();
    let temp = if theme.ascii {
        temp.replace('°', "")
    } else {
        temp
    };
    let peak_at = theme.clock(g.peak.at);
    if w < 50 {
        spans.push(Span::styled(
            format!("{}/{} GiB", gib1(used), gib1(total)),
            theme.pressure(frac),
        ));
        let pk = format!(" peak {} GiB", gib1(g.peak.value));
        if w >= 14 + pk.len() && g.peak.value > 0 {
            spans.push(Span::styled(pk, theme.peak()));
        }
        let used_w: usize = spans.iter().map(|s| s.width()).sum();
        if used_w + util.chars().count() <= w {
            spans.push(Span::raw(util.clone()));
            if used_w + util.chars().count() + temp.chars().count() <= w {
                spans.push(Span::raw(temp));
            }
        }
        return Line::from(spans);
    }
    let head = format!("used {:>5} / {} GiB ", gib1(used), gib1(total));
    // No peak yet (an idle card's first samples): nothing to say, rather than `peak 0 B`.
    let peak = if g.peak.value > 0 {
        format!(" peak {} ({peak_at})", human(g.peak.value))
    } else {
        String::new()
    };
    let extra = format!("{util}{temp}{power}");
    let fixed = head.chars().count() + peak.chars().count();
    let bar_w = w.saturating_sub(fixed + extra.chars().count()).clamp(4, 40);
    let fill = ((frac * bar_w as f64).round() as usize).min(bar_w);
    spans.push(Span::raw(head));
    spans.push(Span::styled(
        theme.full().to_string().repeat(fill),
        theme.pressure(frac),
    ));
    spans.push(Span::styled(
        theme.empty().to_string().repeat(bar_w - fill),
        theme.dim(),
    ));
    spans.push(Span::styled(peak, theme.peak()));
    if fixed + bar_w + extra.chars().count() <= w {
        spans.push(Span::raw(extra));
    }
    Line::from(spans)
}

/// Process lines one card wants: a title row and each process (plus its allocator line).
fn wanted_lines(app: &App, s: &State, g: &GpuState) -> Want {
    let procs = app.rows_on(g.info.index);
    if procs.is_empty() {
        return Want { all: 1, least: 1 };
    }
    let each: Vec<u16> = procs
        .iter()
        .map(|(p, _)| 1 + u16::from(alloc_of(s, p, g).is_some()))
        .collect();
    let rows: usize = each.iter().map(|&r| usize::from(r)).sum();
    Want {
        all: (1 + rows).min(usize::from(u16::MAX)) as u16,
        least: 1 + each.iter().copied().max().unwrap_or(1),
    }
}

fn alloc_of<'a>(
    s: &'a State,
    p: &ProcState,
    g: &GpuState,
) -> Option<(&'a ProcAlloc, &'a DevAlloc)> {
    // A process that ended keeps the last state its companion reported.
    let a = s.alloc_on(p.info.pid, g.info.index)?;
    Some((a.proc, a.dev))
}

pub(crate) fn render_overview(p: &mut Painter, app: &App, area: Rect, theme: &Theme) {
    let s = app.view_state();
    if s.gpus.is_empty() {
        p.paint("companions", |buf| companions_only(app, area, buf, theme));
        return;
    }
    let wants: Vec<Want> = s.gpus.iter().map(|g| wanted_lines(app, s, g)).collect();
    let mut y = area.y;
    for slot in plan(area.height, &wants, app.gpu) {
        match slot {
            Slot::Card { gpu, height, lines } => {
                let r = Rect { y, height, ..area };
                card(p, app, gpu, &s.gpus[gpu], gpu == app.gpu, lines, r, theme);
                y += height;
            }
            Slot::Row { gpu, height } => {
                let r = Rect { y, height, ..area };
                compact(p, app, gpu, &s.gpus[gpu], gpu == app.gpu, r, theme);
                y += height;
            }
            Slot::More { hidden } => {
                let text = format!(
                    " {} {hidden} more GPUs: Tab to scroll ({}/{})",
                    theme.dot(),
                    app.gpu + 1,
                    s.gpus.len()
                );
                p.paint("more GPUs", |buf| {
                    super::put::row(buf, area, y, text, theme.warn())
                });
                y += 1;
            }
        }
    }
}

fn title(g: &GpuState, width: u16, theme: &Theme) -> String {
    let name = short_name(&g.info.name);
    let dot = theme.dot();
    if width < 50 {
        format!(" GPU{} {name} ", g.info.index)
    } else {
        let bus = g.info.pci_bus_id.trim_start_matches("00000000:");
        format!(" GPU {} {dot} {name} {dot} {bus} ", g.info.index)
    }
}

/// The scale note on the card's border: the chart's range against the card's total, and
/// the key that switches between them; `key: false` leaves the key out (a border that also
/// carries alert marks keeps the range).
fn scale_note(s: &Scale, total: u64, full: bool, key: bool, theme: &Theme) -> String {
    let dash = if theme.ascii { "-" } else { "–" };
    let dot = theme.dot();
    let hint = |h: &str| {
        if key {
            format!(" {dot} {h} ")
        } else {
            " ".into()
        }
    };
    if full {
        format!(" card scale{}", hint("f: fit data"))
    } else {
        let lo = s.label(s.lo);
        let lo = lo.split(' ').next().unwrap_or("0");
        if s.hi >= total as f64 {
            format!(
                " {lo}{dash}{} (card){}",
                human(total),
                hint("f: card scale")
            )
        } else {
            format!(
                " {lo}{dash}{} of {}{}",
                s.label(s.hi),
                human(total),
                hint("f: card scale")
            )
        }
    }
}

/// The chart of a series on a fitted (or full-card) scale with the peak and total as
/// references; returns the scale used.
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_chart(
    p: &mut Painter,
    chart: Rect,
    series: &crate::model::series::Series,
    first: Option<i64>,
    peak: Option<u64>,
    total: u64,
    app: &App,
    theme: &Theme,
) -> Scale {
    let areas = plot::split(chart, chart.height >= 3);
    let n = usize::from(areas.plot.width) * slots_per_cell(theme);
    let grid = Grid::window(app.view_state().now, first, app.window(), n.max(1));
    let cols = sample(series, &grid);
    let (lo, hi) = extent(&cols).unwrap_or((0.0, 0.0));
    let full = app.full_scale.then_some(total as f64);
    let scale = Scale::fit(lo, hi, areas.plot.height, full, total as f64);
    let mut refs = vec![(total as f64, theme.error())];
    if let Some(pk) = peak.filter(|&v| v > 0) {
        refs.push((pk as f64, theme.peak()));
    }
    let plot = Plot {
        grid,
        scale,
        traces: vec![Trace {
            cols: &cols,
            kind: Kind::Area,
            style: theme.used(),
            ascii: '#',
        }],
        refs,
    };
    plot::render(p, &areas, &plot, app.window_label(), theme);
    scale
}

#[allow(clippy::too_many_arguments)]
fn card(
    p: &mut Painter,
    app: &App,
    pos: usize,
    g: &GpuState,
    sel: bool,
    lines: u16,
    area: Rect,
    theme: &Theme,
) {
    let s = app.view_state();
    let inner = super::boxed::Frame::inner(area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let chart_h = inner.height.saturating_sub(1 + lines);
    let chart = Rect {
        y: inner.y + 1,
        height: chart_h,
        ..inner
    };
    let mut scale = None;
    if chart_h >= 2 {
        let first = s.header.as_ref().map(|h| h.started);
        scale = Some(memory_chart(
            p,
            chart,
            &g.used,
            first,
            Some(g.peak.value),
            g.total(),
            app,
            theme,
        ));
    }
    let procs_area = Rect {
        y: inner.y + 1 + chart_h,
        height: inner.height - 1 - chart_h,
        ..inner
    };
    // Processes a one-row card could not list: said in its bottom border.
    let unlisted = proc_rows(p, app, pos, g, procs_area, theme);
    let t = title(g, area.width, theme);
    // The alert mark (` ‼ 2 `) goes before the scale note, and is kept when both do not fit.
    let mark = super::alerts::decorate_card(app, pos, area, theme);
    let mark_w = mark.as_ref().map_or(0, |m| m.width());
    let mark = mark.filter(|_| mark_w + t.chars().count() + 4 <= usize::from(area.width));
    let taken = t.chars().count() + mark.as_ref().map_or(0, |m| m.width()) + 4;
    let note = scale.and_then(|sc| {
        [true, false]
            .into_iter()
            .map(|key| scale_note(&sc, g.total(), app.full_scale, key, theme))
            .find(|n| n.chars().count() + taken <= usize::from(area.width))
    });
    p.paint("card border", |buf| {
        let frame = super::boxed::Frame {
            set: theme.border(),
            border: if sel { theme.title() } else { Style::new() },
            title: if sel { theme.title() } else { theme.normal() },
        };
        let mut top = vec![Line::from(t)];
        if let Some(m) = mark {
            top.push(Line::from(m).right_aligned());
        }
        if let Some(n) = note {
            top.push(Line::styled(n, theme.dim()).right_aligned());
        }
        let mut bottom = Vec::new();
        if unlisted > 0 {
            let more = format!(" +{unlisted} more: Enter ");
            if more.chars().count() + 4 <= usize::from(area.width) {
                bottom.push(Line::styled(more, theme.dim()).right_aligned());
            }
        }
        super::boxed::render(&frame, &top, &bottom, area, buf);
    });
    p.paint("usage", |buf| {
        super::put::line(
            &usage_line(g, inner.width, theme),
            Rect { height: 1, ..inner },
            buf,
        )
    });
}

/// Title row, process rows with allocator lines, and "+N more" on a row of its own.
/// Returns how many processes are hidden without a word about them (no room for a title
/// row): the card's border says it.
fn proc_rows(
    p: &mut Painter,
    app: &App,
    pos: usize,
    g: &GpuState,
    area: Rect,
    theme: &Theme,
) -> usize {
    let s = app.view_state();
    if area.height == 0 {
        return 0;
    }
    let procs = app.rows_on(g.info.index);
    if procs.is_empty() {
        if g.error().is_none() {
            let text = if app.filter.is_empty() {
                "no processes".to_string()
            } else {
                format!("no process matches /{}", app.filter)
            };
            p.paint("no processes", |buf| {
                super::put::row(buf, area, area.y, text, theme.dim())
            });
        }
        return 0;
    }
    // A folded job's row says the job, not its lead's allocator; unfolded, a job's first
    // rank gets the job's row above it.
    let jobs = crate::tui::selection::jobs_on(s, g.info.index);
    let mut headed = std::collections::BTreeSet::new();
    let heads: Vec<Option<&crate::model::job::Job>> = procs
        .iter()
        .map(|(pr, _)| {
            let j = jobs.iter().position(|j| j.has(pr.info.pid))?;
            (!app.jobs_folded && headed.insert(j)).then(|| &jobs[j])
        })
        .collect();
    let allocs: Vec<_> = procs
        .iter()
        .map(|(pr, _)| {
            let folded = app.jobs_folded && jobs.iter().any(|j| j.has(pr.info.pid));
            alloc_of(s, pr, g).filter(|_| !folded)
        })
        .collect();
    let need: u16 = allocs
        .iter()
        .zip(&heads)
        .map(|(a, h)| 1 + u16::from(a.is_some()) + u16::from(h.is_some()))
        .sum();
    let header = area.height >= 2;
    let body = area.height - u16::from(header);
    let fits = need <= body;
    // "+N more" gets a row of its own when there is room for it and two processes;
    // otherwise it goes into the title row, in the command column's spare width.
    let more_row = !fits && body >= 3;
    let budget = body - u16::from(more_row);
    let end = area.y + u16::from(header) + budget;
    let mut y = area.y + u16::from(header);
    let mut shown = 0;
    // Scrolled so the selected process stays on the card. `first_visible` keeps a line
    // below the selection for "+N more", which here has its own row (outside `budget`) or
    // goes into the title row: that line is given back when there is one.
    let lines = |i: usize| 1 + u16::from(allocs[i].is_some()) + u16::from(heads[i].is_some());
    let fit = budget + u16::from(app.proc_row + 1 < procs.len());
    let first = first_visible(app, pos, procs.len(), fit, lines);
    for (((pr, pg), alloc), head) in procs.iter().zip(&allocs).zip(&heads).skip(first) {
        if y >= end {
            break;
        }
        if let Some(job) = head {
            let row = Rect {
                y,
                height: 1,
                ..area
            };
            let st = crate::model::job_status::status(s, job);
            let line = super::job_row::job_line(job, &st, false, row.width, theme);
            p.paint("job row", |buf| super::put::line(&line, row, buf));
            y += 1;
            if y >= end {
                break;
            }
        }
        let row = Rect {
            y,
            height: 1,
            ..area
        };
        let hist_w = history_width(row.width);
        let text = Rect {
            width: row.width - hist_w,
            ..row
        };
        p.paint("process row", |buf| {
            render_row(app, pos, pr, pg, text, buf, theme)
        });
        if hist_w > 0 {
            let spark = Rect {
                x: text.right() + 1,
                width: hist_w - 1,
                ..row
            };
            p.paint("process history", |buf| {
                process_history(app, pr, pg, spark, buf, theme)
            });
        }
        y += 1;
        shown += 1;
        if let Some((pa, d)) = alloc
            && y < end
        {
            let row = Rect { y, ..row };
            let risk = super::alerts::frag_risk(app, pa.pid, pg.gpu);
            let grab = super::policy::Grab::of(app, pa.pid, pg.gpu, pg.last_used, g.total());
            let now = app.view_state().now;
            let width = usize::from(row.width);
            let line = super::alloc_line::fitted(pa, d, risk, Some(&grab), now, theme, width);
            p.paint("allocator line", |buf| super::put::line(&line, row, buf));
            y += 1;
        }
    }
    let left = procs.len() - shown;
    let below = left - first;
    let wide = area.width >= 50;
    if left > 0 && more_row {
        let text = match (first, wide) {
            (0, true) => format!("+{left} more processes: Enter for the detail view"),
            (0, false) => format!("+{left} more: Enter shows all"),
            (_, true) if below > 0 => {
                format!("+{first} above, +{below} below: Enter for the detail view")
            }
            (_, true) => format!("+{first} above: Enter for the detail view"),
            (_, false) if below > 0 => format!("+{first} above +{below} below"),
            (_, false) => format!("+{first} above: Enter shows all"),
        };
        p.paint("more processes", |buf| {
            super::put::row(buf, area, y, text, theme.dim())
        });
    }
    if header {
        let hist_w = history_width(area.width);
        // "+N more" without a row of its own goes into the command column's title: the
        // other titles stay where they are.
        let more = (left > 0 && !more_row).then_some((first, below));
        let table_w = area.width - hist_w;
        let mut titles = proc_header(app, table_w, theme.ascii, more);
        super::procs::hit_header(app, area.x, area.y, area.width, table_w, theme.ascii);
        if hist_w > 0 {
            titles.push_str(&format!(
                " {:<w$}",
                "USED OVER TIME",
                w = usize::from(hist_w - 1)
            ));
        }
        p.paint("process titles", |buf| {
            super::put::row(buf, area, area.y, titles, theme.dim())
        });
        0
    } else {
        left
    }
}

/// On wide cards each process row ends with its own usage over the window, in the cells
/// a padded command column would otherwise leave empty.
fn history_width(width: u16) -> u16 {
    if width >= 100 {
        (width - 80).min(61)
    } else {
        0
    }
}

fn process_history(
    app: &App,
    pr: &ProcState,
    pg: &ProcGpu,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    let s = app.view_state();
    let grid = Grid::window(
        s.now,
        Some(pr.first_seen),
        app.window(),
        usize::from(area.width).max(1),
    );
    // A process missing from a tick has left the card (or not arrived): blank, not the
    // failed-sample mark a GPU gets.
    let cols: Vec<Col> = sample(&pg.used, &grid)
        .into_iter()
        .map(|c| if c == Col::Gap { Col::None } else { c })
        .collect();
    let (lo, hi) = extent(&cols).unwrap_or((0.0, 0.0));
    // Zero-based: a row compares processes, so 0 is the floor for every row.
    let scale = Scale::fit(0.0, hi.max(lo), 3, Some(hi.max(1.0)), hi);
    sparkline(buf, area, &cols, &scale, theme, theme.used());
}

/// One or two rows for a GPU when there is no room for its card: name, usage and a
/// sparkline on one row; with two, the sparkline gets the whole second row.
fn compact(
    p: &mut Painter,
    app: &App,
    pos: usize,
    g: &GpuState,
    sel: bool,
    area: Rect,
    theme: &Theme,
) {
    let s = app.view_state();
    let mark = if sel {
        if theme.ascii { ">" } else { "▶" }
    } else {
        " "
    };
    let head = format!("{mark}GPU{} {} ", g.info.index, short_name(&g.info.name));
    let style = if sel { theme.title() } else { theme.normal() };
    // The alert mark follows the name, where a card would have it in its border.
    let mut alert = super::alerts::decorate_row(app, pos, area, theme, false);
    // On one row the usage needs its whole number and 7 cells of sparkline beside the name
    // and the mark; a mark that leaves less gives up its past part.
    let usage_min = usage_line(g, 1, theme).width() + 7;
    let mark_w = alert.as_ref().map_or(0, |a| a.width());
    if area.height < 2 && head.chars().count() + mark_w + usage_min > usize::from(area.width) {
        alert = super::alerts::decorate_row(app, pos, area, theme, true);
    }
    let head_w =
        (head.chars().count() + alert.as_ref().map_or(0, |a| a.width().saturating_sub(1))) as u16;
    p.paint("gpu row name", |buf| {
        let mut spans = vec![Span::styled(head, style)];
        // The name already ends in a space.
        spans.extend(alert.map(|a| Span::styled(a.content.trim_start().to_string(), a.style)));
        super::put::line(&Line::from(spans), Rect { height: 1, ..area }, buf)
    });
    let rest_w = area.width.saturating_sub(head_w);
    // One row keeps at least 8 cells for the sparkline; the usage drops its peak first.
    let usage_room = if area.height >= 2 {
        rest_w
    } else {
        rest_w.saturating_sub(8).min(49)
    };
    let line = usage_line(g, usage_room, theme);
    let line_w = line.width() as u16;
    let (usage, spark) = if area.height >= 2 {
        (
            Rect {
                x: area.x + head_w,
                y: area.y,
                width: rest_w,
                height: 1,
            },
            Rect {
                x: area.x + 1,
                y: area.y + 1,
                width: area.width.saturating_sub(1),
                height: 1,
            },
        )
    } else {
        // One row: usage at the right, the sparkline fills between name and usage.
        let usage_w = line_w.min(rest_w.saturating_sub(7));
        (
            Rect {
                x: area.right() - usage_w,
                y: area.y,
                width: usage_w,
                height: 1,
            },
            Rect {
                x: area.x + head_w,
                y: area.y,
                width: rest_w.saturating_sub(usage_w + 1),
                height: 1,
            },
        )
    };
    p.paint("gpu row usage", |buf| super::put::line(&line, usage, buf));
    if spark.width == 0 {
        return;
    }
    let first = s.header.as_ref().map(|h| h.started);
    let grid = Grid::window(s.now, first, app.window(), usize::from(spark.width));
    let cols = sample(&g.used, &grid);
    let (lo, hi) = extent(&cols).unwrap_or((0.0, 0.0));
    let total = g.total() as f64;
    let scale = Scale::fit(lo, hi, 3, app.full_scale.then_some(total), total);
    p.paint("sparkline", |buf| {
        sparkline(buf, spark, &cols, &scale, theme, theme.used())
    });
}

/// Without NVML (no driver, or a container without it) companions still report: list them
/// with their allocator state per device, since there are no GPU cards to hang them on.
fn companions_only(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let procs: Vec<_> = s.companions.by_pid.values().collect();
    // GPUs were reported, and --gpu left none of them (the status line says which exist).
    let filtered = !s.gpu_infos().is_empty();
    if procs.is_empty() {
        let msg = if filtered {
            "no GPU matches --gpu (the status line names the GPUs there are)"
        } else {
            "waiting for the first sample (no GPUs reported yet, no companion connected)"
        };
        super::put::row(buf, area, area.y, msg, theme.dim());
        return;
    }
    let head = if filtered {
        "no GPU matches --gpu: allocator state reported by companions"
    } else {
        "no NVML data: allocator state reported by companions"
    };
    super::put::row(buf, area, area.y, head, theme.title());
    let mut y = area.y + 1;
    for pa in procs {
        if y >= area.y + area.height {
            break;
        }
        let cmd = pa
            .hello
            .as_ref()
            .and_then(|h| h.cmdline.clone())
            .unwrap_or_default();
        let line = format!("{:>7} {} {cmd}", pa.pid, super::policy::framework_label(pa));
        super::put::row(buf, area, y, line, theme.normal());
        super::procs::mark_companion(app, pa.pid, Rect::new(area.x, y, area.width, 1), buf, theme);
        y += 1;
        for d in pa.devices.values() {
            if y >= area.y + area.height {
                break;
            }
            let width = usize::from(area.width);
            super::alloc_line::fitted(pa, d, None, None, s.now, theme, width).render(
                Rect {
                    x: area.x,
                    y,
                    width: area.width,
                    height: 1,
                },
                buf,
            );
            y += 1;
        }
    }
}
