//! Detail of one GPU: a chart of the selected process (its NVML usage and, with a
//! companion, allocated, reserved and the per-epoch floor and peak as separate series,
//! epoch marks on their own row), or of the whole card (`c`); the process table; and
//! what is known about the selected process. The chart keeps at least half the height.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::allocator::{AllocView, frag_style, render_process_alloc};
use super::chart::{Col, Grid, Scale, extent, sample, sparkline};
use super::overview::{memory_chart, short_name, usage_line};
use super::paint::Painter;
use super::plot::{self, Kind, Plot, Trace, slots_per_cell};
use super::procs::{mapping_note, render_table};
use super::theme::Theme;
use crate::fmt::human;
use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::model::state::{GpuState, ProcGpu, ProcState};
use crate::tui::app::App;

/// Rows of the pieces under the chart, decided before the chart takes the rest.
#[derive(Debug, Default, Clone, Copy)]
struct Rows {
    legend: u16,
    epochs: u16,
    trend: u16,
    brief: u16,
    table: u16,
    panel: u16,
    note: u16,
}

pub(crate) fn render_detail(p: &mut Painter, app: &App, area: Rect, theme: &Theme) {
    let s = app.view_state();
    let Some(g) = s.gpus.get(app.gpu) else { return };
    let bus = g.info.pci_bus_id.trim_start_matches("00000000:");
    let dot = theme.dot();
    let title = if area.width >= 70 {
        format!(
            " GPU {} {dot} {} {dot} {} {dot} {bus} ",
            g.info.index,
            short_name(&g.info.name),
            g.info.uuid
        )
    } else {
        format!(" GPU{} {} ", g.info.index, short_name(&g.info.name))
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(title)
        .title_style(theme.title());
    let inner = block.inner(area);
    p.paint("detail border", |buf| block.render(area, buf));
    if inner.height < 3 || inner.width < 4 {
        return;
    }
    let procs = app.rows_on(g.info.index);
    let sel = procs
        .get(app.proc_row.min(procs.len().saturating_sub(1)))
        .copied();
    // A process that ended keeps the last state its companion reported: its post-mortem.
    let companion = sel.and_then(|(pr, _)| s.companions.latest(pr.info.pid));
    let dev = sel.and_then(|(pr, _)| s.alloc_on(pr.info.pid, g.info.index).map(|a| a.dev));
    let proc_chart = sel.filter(|_| !app.card_chart);
    // The allocator panel's place depends on whether any process here has a companion,
    // not the selected one, so moving the selection does not make the table jump (a
    // process without one gets the reason in that place). The epochs and trend rows
    // follow the selected process: without them the chart takes the rows back.
    let any_companion = procs
        .iter()
        .any(|(pr, _)| s.companions.latest(pr.info.pid).is_some());
    // Wide: a panel beside the table, with the allocator (companion) or the process's facts.
    let side = sel.is_some() && inner.width >= 110;
    let remote = app.fleet.as_deref().and_then(|f| f.open.as_deref());
    let note_text = sel.map(|(pr, pg)| mapping_note(pr, pg, remote));
    // Rows the wrapped note needs (word wrap may take one more than the plain division).
    let note_rows = note_text.as_ref().filter(|_| !side).map_or(0, |t| {
        let w = usize::from(inner.width.max(1));
        (t.chars().count().div_ceil(w) + usize::from(t.chars().count() > w)).min(3) as u16
    });
    let view = match (companion, sel) {
        (Some(proc_alloc), Some((pr, pg))) => Some(AllocView {
            nvml_used: pg.last_used,
            nvml_peak: Some(pg.peak.value),
            proc: proc_alloc,
            dev,
            exit: pr.exit,
            risk: super::alerts::frag_risk(app, proc_alloc.pid, pg.gpu),
            grab: Some(super::policy::Grab::of(
                app,
                proc_alloc.pid,
                pg.gpu,
                pg.last_used,
                s.gpus
                    .iter()
                    .find(|g| g.info.index == pg.gpu)
                    .map_or(0, |g| g.total()),
            )),
            now: s.now,
        }),
        _ => None,
    };
    // Lines the allocator panel has to show (its free-block histogram included), and the
    // short form for when it gets no place.
    let panel_want = view.as_ref().map_or(0, |v| {
        super::allocator::panel_lines(v, inner.width, 40, theme).len() as u16
    });
    let brief = companion.map(|pa| super::alloc_brief::lines(pa, dev, theme));
    let rows = plan_rows(
        inner.height - 1,
        procs.len() as u16,
        note_rows,
        any_companion,
        dev.is_some() && proc_chart.is_some(),
        dev.is_some(),
        side.then_some(panel_want),
        brief.as_ref().map_or(0, |b| b.len() as u16),
    );
    let [
        usage,
        legend,
        chart,
        epochs,
        trend,
        brief_area,
        bottom,
        panel,
        note,
    ] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(rows.legend),
        Constraint::Min(3),
        Constraint::Length(rows.epochs),
        Constraint::Length(rows.trend),
        Constraint::Length(rows.brief),
        Constraint::Length(rows.table),
        Constraint::Length(rows.panel),
        Constraint::Length(rows.note),
    ])
    .areas(inner);
    p.paint("usage", |buf| {
        usage_line(g, usage.width, theme).render(usage, buf)
    });
    let grid = match proc_chart {
        Some((pr, pg)) => Some(process_chart(p, app, g, pr, pg, dev, legend, chart, theme)),
        None => {
            card_legend(p, g, sel.is_some(), legend, theme);
            let first = s.header.as_ref().map(|h| h.started);
            let total = g.total();
            memory_chart(
                p,
                chart,
                &g.used,
                first,
                Some(g.peak.value),
                total,
                app,
                theme,
            );
            None
        }
    };
    if let (Some(grid), Some(pa), true) = (grid, companion, epochs.height > 0) {
        p.paint("epoch marks", |buf| {
            epoch_row(buf, pa, &grid, epochs, theme)
        });
    }
    if let (Some(d), true) = (dev, trend.height > 0) {
        let until = sel.map_or(s.now, |(pr, _)| pr.until(s.now));
        let first = sel.map(|(pr, _)| pr.first_seen);
        p.paint("fragmentation trend", |buf| {
            frag_trend(buf, d, app, (first, until), trend, theme)
        });
    }
    let (table, side_panel) = if side {
        let [t, _, sp] = Layout::horizontal([
            Constraint::Percentage(58),
            Constraint::Length(1),
            Constraint::Min(30),
        ])
        .areas(bottom);
        (t, Some(sp))
    } else {
        (bottom, None)
    };
    p.paint("process table", |buf| {
        render_table(app, &procs, table, buf, theme)
    });
    if let (None, Some((pr, pg)), Some(a)) = (companion, sel, side_panel) {
        let lines = process_facts(pr, pg, remote, theme);
        p.paint("process facts", |buf| {
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .render(a, buf)
        });
    }
    if let Some(view) = &view {
        let target = side_panel.or((panel.height > 0).then_some(panel));
        if let Some(a) = target {
            p.paint("allocator panel", |buf| {
                render_process_alloc(a, buf, view, theme)
            });
        }
    } else if let (Some((pr, pg)), true) = (sel, side_panel.is_none() && panel.height > 0) {
        // The panel's place is kept for another process's companion: say why this one has
        // none (beside the table, `process_facts` says it).
        p.paint("no companion", |buf| {
            super::procs::render_no_companion(pr, pg, remote, panel, buf, theme)
        });
    }
    if let (Some(lines), true) = (brief, brief_area.height > 0) {
        for (i, l) in lines
            .into_iter()
            .take(usize::from(brief_area.height))
            .enumerate()
        {
            let l = super::text::fit_words(l, usize::from(brief_area.width), theme.ascii);
            let r = Rect {
                y: brief_area.y + i as u16,
                height: 1,
                ..brief_area
            };
            p.paint("allocator brief", |buf| l.render(r, buf));
        }
    }
    if let (true, Some(text)) = (note.height > 0, note_text) {
        // Wrapped, never cut: the answer is at the end of the sentence.
        p.paint("mapping note", |buf| {
            Paragraph::new(text)
                .style(theme.dim())
                .wrap(Wrap { trim: true })
                .render(note, buf)
        });
    }
}

/// Beside the table when there is no companion: who the process is, its whole command
/// line, which CUDA device it sees this card as, and how to get its allocator's view.
fn process_facts(
    pr: &ProcState,
    pg: &ProcGpu,
    remote: Option<&str>,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let user = pr.info.user.clone().unwrap_or_else(|| "?".into());
    let age = crate::fmt::duration(pg.last_seen - pr.first_seen);
    let own = pr
        .info
        .cmdline
        .clone()
        .or_else(|| pr.info.name.clone())
        .unwrap_or_else(|| "(command not readable)".into());
    // A multiprocessing child is shown running its launcher's program.
    let cmd = match (&pr.who.program, pr.who.mp_child) {
        (Some(prog), true) => format!("{}{prog} (multiprocessing child)", pr.who.rank_prefix()),
        _ => format!("{}{own}", pr.who.rank_prefix()),
    };
    let now = match (pr.exit, pg.last_used) {
        (Some(e), _) => format!("{} at {}", e.cause.label(), theme.clock(e.at)),
        (None, Some(u)) => format!("{} now", human(u)),
        (None, None) => "not listed now".into(),
    };
    let advice = if pr.exit.is_some() {
        "it had no companion: only NVML's view of it is known. Next time start it with \
         `gpumon run -- CMD` to keep its allocator's state and OOMs"
    } else {
        "no companion: start it with `gpumon run -- CMD` (or `import gpumon; gpumon.start()`) \
         to see its allocator: allocated, cached, fragmentation, epochs"
    };
    vec![
        Line::from(vec![
            Span::styled(format!("pid {} ", pr.info.pid), theme.title()),
            Span::raw(format!(
                "{user} {} seen since {} ({age})",
                theme.dot(),
                theme.clock(pr.first_seen)
            )),
        ]),
        Line::from(Span::raw(cmd)),
        Line::from(vec![
            Span::raw("NVML: "),
            Span::styled(now, theme.used()),
            Span::styled(
                format!(
                    ", peak {} at {}",
                    human(pg.peak.value),
                    theme.clock(pg.peak.at)
                ),
                theme.peak(),
            ),
        ]),
        Line::from(Span::styled(mapping_note(pr, pg, remote), theme.dim())),
        Line::from(Span::styled(advice, theme.dim())),
    ]
}

/// Heights of what surrounds the chart in `avail` rows; the chart keeps at least half.
/// `side`: the allocator panel sits beside the table and wants that many lines (its
/// free-block histogram gets real height when the pane has it); `brief`: the lines of the
/// allocator's short form, shown when the panel gets no place.
#[allow(clippy::too_many_arguments)]
fn plan_rows(
    avail: u16,
    procs: u16,
    note_rows: u16,
    companion: bool,
    epochs: bool,
    dev: bool,
    side: Option<u16>,
    brief: u16,
) -> Rows {
    let mut r = Rows::default();
    let mut left = avail.saturating_sub((avail / 2).max(3));
    let take = |left: &mut u16, want: u16| {
        let got = want.min(*left);
        *left -= got;
        got
    };
    // Beside a panel the table keeps rows for the panel's lines too.
    let table_min = if side.is_some() { 7 } else { 2 };
    r.table = take(&mut left, (procs + 1).clamp(2, 4).max(table_min));
    if avail >= 10 {
        r.legend = take(&mut left, 1);
    }
    if epochs && avail >= 10 {
        r.epochs = take(&mut left, 1);
    }
    let panel_fits = companion && side.is_none() && avail >= 18;
    if avail >= 14 {
        r.note = take(&mut left, note_rows);
    }
    if dev && avail >= 14 {
        r.trend = take(&mut left, 1);
    }
    if panel_fits && left >= 5 {
        r.panel = take(&mut left, 8);
    }
    // Without a place for the panel, its OOM and policy lines, before the note.
    if brief > 0 && side.is_none() && r.panel == 0 && avail >= 12 {
        r.brief = take(&mut left, brief);
        let short = (brief - r.brief).min(r.note);
        r.note -= short;
        r.brief += short;
    }
    // The panel beside the table: as many rows as its lines want, within what is left.
    if let Some(want) = side {
        r.table += take(&mut left, want.saturating_sub(r.table));
    }
    // Spare rows beyond the chart's half go to more process rows.
    r.table += take(&mut left, (procs + 1).saturating_sub(r.table));
    r
}

/// The selected process over time: NVML's view, and the allocator's view when a
/// companion reports it. Returns the grid so epoch marks line up with it.
#[allow(clippy::too_many_arguments)]
fn process_chart(
    p: &mut Painter,
    app: &App,
    g: &GpuState,
    pr: &ProcState,
    pg: &ProcGpu,
    dev: Option<&DevAlloc>,
    legend: Rect,
    chart: Rect,
    theme: &Theme,
) -> Grid {
    let s = app.view_state();
    let areas = plot::split(chart, chart.height >= 3);
    let n = usize::from(areas.plot.width) * slots_per_cell(theme);
    // A process that ended is charted to its exit: its whole story, no empty time after.
    let grid = Grid::window(pr.until(s.now), Some(pr.first_seen), app.window(), n.max(1));
    let mut used = sample(&pg.used, &grid);
    // After its last sighting NVML simply does not list it (it is ending): no data, not
    // the read-failure mark.
    for (i, c) in used.iter_mut().enumerate() {
        if *c == Col::Gap && grid.start + grid.step * i as i64 > pg.last_seen {
            *c = Col::None;
        }
    }
    let (alloc, reserved, floor, peak) = match dev {
        Some(d) => (
            sample(&d.allocated, &grid),
            sample(&d.reserved, &grid),
            epoch_steps(d, &grid, |e| e.floor),
            epoch_steps(d, &grid, |e| e.peak),
        ),
        None => Default::default(),
    };
    let mut traces = vec![Trace {
        cols: &used,
        kind: Kind::Area,
        style: theme.used(),
        ascii: '#',
    }];
    // Thin series over the area, each with its own colour and letter (the letter is the
    // mark without colour); the floor last, on top: it is what a leak moves.
    for (cols, style, ch) in [
        (&reserved, theme.reserved(), 'r'),
        (&alloc, theme.allocated(), 'a'),
        (&peak, theme.peak(), 'p'),
        (&floor, theme.floor(), 'f'),
    ] {
        if cols.iter().any(|c| c.val().is_some()) {
            traces.push(Trace {
                cols,
                kind: Kind::Line,
                style,
                ascii: ch,
            });
        }
    }
    // With allocator series the NVML usage is a line too: an area would hide the
    // allocator's lines under it (they are at or below it).
    if traces.len() > 1 {
        traces[0].kind = Kind::Line;
    }
    let solo = super::series::solo(&mut traces, app.solo);
    let (lo, hi) = traces
        .iter()
        .filter_map(|t| extent(t.cols))
        .fold((f64::MAX, 0.0f64), |(a, b), (lo, hi)| {
            (a.min(lo), b.max(hi))
        });
    // Zero-based for a process that ended: its story is read as a whole, and a fitted
    // axis (6.4–7.0 GiB) would make a 5 % step look like a cliff.
    let lo = if lo == f64::MAX || pr.exit.is_some() {
        0.0
    } else {
        lo
    };
    let total = g.total() as f64;
    let scale = Scale::fit(
        lo,
        hi,
        areas.plot.height,
        app.full_scale.then_some(total),
        total,
    );
    let limit = dev.and_then(|d| d.limit()).map(|l| l as f64);
    let mut refs = vec![(total, theme.error())];
    if let Some(l) = limit {
        refs.push((l, theme.warn()));
    }
    if pg.peak.value > 0 {
        refs.push((pg.peak.value as f64, theme.peak()));
    }
    let mut pieces = process_legend(pr, pg, &traces, &scale, total, limit, app.full_scale, theme);
    if let Some(piece) = super::series::solo_piece(solo, app.solo, theme) {
        pieces.insert(1, piece);
    }
    let legend_line = super::text::whole_pieces(pieces, legend.width);
    if legend.height > 0 {
        p.paint("chart legend", |buf| legend_line.render(legend, buf));
    }
    let plot = Plot {
        grid,
        scale,
        traces,
        refs,
    };
    plot::render(p, &areas, &plot, app.window_label(), theme);
    grid
}

/// Per slot, the floor (or peak) of the epoch the slot belongs to: a step line.
pub(crate) fn epoch_steps(
    d: &DevAlloc,
    g: &Grid,
    f: impl Fn(&crate::wire::EpochRecord) -> Option<u64>,
) -> Vec<Col> {
    let mut cols = vec![Col::None; g.n];
    let mut prev_end: Option<i64> = None;
    for e in &d.epochs {
        let (Some(t), Some(v)) = (e.t, f(e)) else {
            continue;
        };
        // An epoch record arrives at the end of its epoch: it spans from the previous end.
        let from = prev_end.unwrap_or(t).max(g.start);
        prev_end = Some(t);
        if t < g.start || from >= g.end() {
            continue;
        }
        let a = g.slot(from).unwrap_or(0);
        let b = g.slot(t.min(g.end() - 1)).unwrap_or(g.n - 1);
        for c in cols.iter_mut().take(b + 1).skip(a) {
            *c = Col::Val(v as f64);
        }
    }
    cols
}

#[allow(clippy::too_many_arguments)]
fn process_legend(
    pr: &ProcState,
    pg: &ProcGpu,
    traces: &[Trace],
    scale: &Scale,
    total: f64,
    limit: Option<f64>,
    full: bool,
    theme: &Theme,
) -> Vec<Vec<Span<'static>>> {
    // The first series is drawn differently (area, or braille without colour).
    let mark = |t: &Trace| plot::legend_mark(t, std::ptr::eq(t, &traces[0]), theme);
    let names = ["used", "resv", "alloc", "floor/ep", "peak/ep"];
    let mut spans = vec![vec![Span::styled(
        format!("pid {} ", pr.info.pid),
        theme.title(),
    )]];
    for t in traces {
        let name = match t.ascii {
            'r' => names[1],
            'a' => names[2],
            'f' => names[3],
            'p' => names[4],
            _ => names[0],
        };
        spans.push(vec![
            Span::styled(mark(t), t.style),
            Span::raw(format!(" {name}  ")),
        ]);
    }
    spans.push(vec![Span::styled(
        format!("peak {} ", human(pg.peak.value)),
        theme.peak(),
    )]);
    if let Some(l) = limit.filter(|l| *l <= scale.hi) {
        spans.push(vec![Span::styled(
            format!("limit {} ", human(l as u64)),
            theme.warn(),
        )]);
    }
    let off = if total > scale.hi && !full {
        let up = if theme.ascii { "^" } else { "↑" };
        format!("card {} {up} ", human(total as u64))
    } else {
        format!("card {} ", human(total as u64))
    };
    spans.push(vec![Span::styled(off, theme.error())]);
    spans.push(vec![Span::styled("c: card  f: scale", theme.dim())]);
    spans
}

fn card_legend(p: &mut Painter, g: &GpuState, has_sel: bool, area: Rect, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let full = if theme.ascii { "#" } else { "█" };
    let mut pieces = vec![
        vec![Span::styled(
            format!("GPU {} ", g.info.index),
            theme.title(),
        )],
        vec![
            Span::styled(full, theme.used()),
            Span::raw(" used by all processes  "),
        ],
        vec![Span::styled(
            format!("peak {} ", human(g.peak.value)),
            theme.peak(),
        )],
        vec![Span::styled(
            format!("card {}  ", human(g.total())),
            theme.error(),
        )],
    ];
    if has_sel {
        pieces.push(vec![Span::styled(
            "c: chart the process  f: scale",
            theme.dim(),
        )]);
    }
    let line = super::text::whole_pieces(pieces, area.width);
    p.paint("chart legend", |buf| line.render(area, buf));
}

/// Epoch ends on their own row under the chart, at the columns of the chart's grid.
fn epoch_row(
    buf: &mut ratatui::buffer::Buffer,
    pa: &ProcAlloc,
    g: &Grid,
    area: Rect,
    theme: &Theme,
) {
    let axis = if area.width >= plot::Y_AXIS + 12 {
        plot::Y_AXIS
    } else {
        0
    };
    let k = slots_per_cell(theme) as i64;
    let tick = if theme.ascii { '^' } else { '╹' };
    buf.set_stringn(area.x, area.y, "epochs", usize::from(axis), theme.dim());
    let mut free_from = area.x + axis;
    for (t, e) in pa.epoch_times() {
        let Some(slot) = g.slot(t) else { continue };
        let x = area.x + axis + (slot as i64 / k) as u16;
        if x < free_from || x >= area.right() {
            continue;
        }
        buf[(x, area.y)].set_char(tick).set_style(theme.dim());
        let label = format!("e{e}");
        let end = x + 1 + label.len() as u16;
        if end <= area.right() {
            buf.set_string(x + 1, area.y, &label, theme.dim());
            free_from = end + 1;
        } else {
            free_from = x + 1;
        }
    }
}

/// One row: the selected process's fragmentation index over the same window, and its
/// stranded bytes now, so a cache that shatters over hours is visible.
fn frag_trend(
    buf: &mut ratatui::buffer::Buffer,
    d: &DevAlloc,
    app: &App,
    (first, until): (Option<crate::model::time::Ts>, crate::model::time::Ts),
    area: Rect,
    theme: &Theme,
) {
    let label = "frag F ";
    let now = match d
        .frag
        .as_ref()
        .and_then(|f| Some((f.index()?, f.stranded()?)))
    {
        Some((f, stranded)) => format!(" {f:.2} now, {} stranded", human(stranded)),
        None => " n/a".into(),
    };
    let lw = label.len() as u16;
    let spark_w = area.width.saturating_sub(lw + now.chars().count() as u16);
    buf.set_stringn(area.x, area.y, label, usize::from(area.width), theme.dim());
    let grid = Grid::window(until, first, app.window(), usize::from(spark_w).max(1));
    let cols = super::chart::hold(sample(&d.frag_f, &grid));
    let spark = Rect {
        x: area.x + lw,
        width: spark_w,
        ..area
    };
    let unit = Scale::unit_fraction();
    let style: Style = frag_style(
        d.frag.as_ref().and_then(|f| f.index()).unwrap_or(0.0),
        theme,
    );
    sparkline(buf, spark, &cols, &unit, theme, style);
    buf.set_stringn(
        spark.x + spark_w,
        area.y,
        now,
        usize::from(area.width.saturating_sub(lw + spark_w)),
        theme.dim(),
    );
}
