//! Detail of one GPU: memory over time (used, peak, total), the process table,
//! and what is known about the selected process.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Borders, Widget};

use super::allocator::{AllocView, frag_style, render_process_alloc};
use super::chart::{AreaChart, columns, sparkline};
use super::overview::{short_name, usage_line};
use super::procs::{mapping_note, render_table};
use super::theme::Theme;
use crate::app::App;
use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::model::bytes::human;
use crate::model::time::Ts;

pub fn render_detail(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
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
    block.render(area, buf);
    if inner.height < 3 {
        return;
    }
    let procs = app.rows_on(g.info.index);
    let sel = procs
        .get(app.proc_row.min(procs.len().saturating_sub(1)))
        .copied();
    let all = s.gpu_infos();
    let companion = sel.and_then(|(p, _)| s.companions.get(p.info.pid));
    let dev = sel.and_then(|(p, _)| s.companions.for_gpu_in(p.info.pid, &g.info, all));
    // The layout depends on whether any process here has a companion, not the selected
    // one: moving the selection must not make the table jump between widths.
    let any_companion = procs
        .iter()
        .any(|(p, _)| s.companions.get(p.info.pid).is_some());
    let side = any_companion && inner.width >= 110;
    let below = any_companion && !side && inner.height >= 16;
    let table_h = (procs.len() as u16 + 1)
        .min(inner.height / 3)
        .max(2)
        .max(if side { 9 } else { 2 });
    let panel_h = if below { 8.min(inner.height / 3) } else { 0 };
    let note_h = u16::from(inner.height >= 14 && !below);
    let trend_h = u16::from(any_companion && inner.height >= 12);
    let [usage, chart, trend, bottom, panel, note] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(trend_h),
        Constraint::Length(table_h),
        Constraint::Length(panel_h),
        Constraint::Length(note_h),
    ])
    .areas(inner);
    let (table, side_panel) = if side {
        let [t, _, p] = Layout::horizontal([
            Constraint::Percentage(55),
            Constraint::Length(1),
            Constraint::Min(30),
        ])
        .areas(bottom);
        (t, Some(p))
    } else {
        (bottom, None)
    };
    usage_line(g, usage.width, theme).render(usage, buf);
    let now = s.now;
    let from = now - app.window_ms();
    let cols = columns(
        &g.used,
        from,
        now,
        chart.width.saturating_sub(super::chart::Y_AXIS),
    );
    let mut lines = Vec::new();
    if g.peak.value > 0 {
        let pk = format!(
            " peak {} at {} ",
            human(g.peak.value),
            theme.clock(g.peak.at)
        );
        lines.push((g.peak.value as f64, pk, theme.peak()));
    }
    AreaChart {
        cols: &cols,
        y_max: g.total() as f64,
        lines,
        marks: epoch_marks(
            companion,
            from,
            now,
            chart.width.saturating_sub(super::chart::Y_AXIS),
        ),
        style: theme.used(),
        x_labels: (format!("-{}", app.window_label()), "now".into()),
    }
    .render(buf, chart, theme);
    if let (Some(d), true) = (dev, trend.height > 0) {
        frag_trend(d, from, now, trend, buf, theme);
    }
    render_table(app, &procs, table, buf, theme);
    if let (Some(proc_alloc), Some((_, pg))) = (companion, sel) {
        let view = AllocView {
            nvml_used: pg.last_used,
            nvml_peak: Some(pg.peak.value),
            proc: proc_alloc,
            dev,
        };
        if let Some(area) = side_panel {
            render_process_alloc(area, buf, &view, theme);
        } else if panel.height > 0 {
            render_process_alloc(panel, buf, &view, theme);
        }
    } else if let Some((p, pg)) = sel {
        super::procs::render_no_companion(p, pg, side_panel.unwrap_or(panel), buf, theme);
    }
    if note.height > 0 {
        if let Some((p, pg)) = procs.get(app.proc_row) {
            buf.set_stringn(
                note.x,
                note.y,
                mapping_note(p, pg),
                usize::from(note.width),
                theme.dim(),
            );
        }
    }
}

/// Epoch ends inside the window as chart columns, labelled `e12`.
fn epoch_marks(p: Option<&ProcAlloc>, from: Ts, to: Ts, width: u16) -> Vec<(usize, String)> {
    let Some(p) = p else { return Vec::new() };
    if to <= from || width == 0 {
        return Vec::new();
    }
    p.epoch_times()
        .into_iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(t, e)| {
            let col = ((t - from) as f64 / (to - from) as f64 * f64::from(width)) as usize;
            (col.min(usize::from(width) - 1), format!("e{e}"))
        })
        .collect()
}

/// One row under the chart: the selected process's fragmentation index over the same
/// window, and its stranded bytes now, so a cache that shatters over hours is visible.
fn frag_trend(d: &DevAlloc, from: Ts, to: Ts, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let label = "      F ";
    let now = match d
        .frag
        .as_ref()
        .and_then(|f| Some((f.index()?, f.stranded()?)))
    {
        Some((f, stranded)) => format!(" {f:.2} now, {} stranded", human(stranded)),
        None => " n/a".into(),
    };
    let spark_w = area
        .width
        .saturating_sub((label.len() + now.chars().count()) as u16);
    buf.set_string(area.x, area.y, label, theme.dim());
    let cols = columns(&d.frag_f, from, to, spark_w);
    let spark = Rect {
        x: area.x + label.len() as u16,
        width: spark_w,
        ..area
    };
    sparkline(
        buf,
        spark,
        &cols,
        1.0,
        theme,
        frag_style(
            d.frag.as_ref().and_then(|f| f.index()).unwrap_or(0.0),
            theme,
        ),
    );
    buf.set_stringn(
        spark.x + spark_w,
        area.y,
        now,
        usize::from(area.width),
        theme.dim(),
    );
}
