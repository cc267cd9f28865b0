//! Detail of one GPU: memory over time (used, peak, total), the process table,
//! and what is known about the selected process.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Borders, Widget};

use super::chart::{AreaChart, columns};
use super::overview::{short_name, usage_line};
use super::procs::{mapping_note, render_table};
use super::theme::Theme;
use crate::app::App;
use crate::model::bytes::human;

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
    let procs = s.procs_on(g.info.index);
    let table_h = (procs.len() as u16 + 1).clamp(2, inner.height / 2);
    let note_h = u16::from(inner.height >= 14);
    let [usage, chart, table, note] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(table_h),
        Constraint::Length(note_h),
    ])
    .areas(inner);
    usage_line(g, usage.width, theme, false).render(usage, buf);
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
        marks: Vec::new(),
        style: theme.used(),
        x_labels: (format!("-{}", app.window_label()), "now".into()),
    }
    .render(buf, chart, theme);
    render_table(&procs, app.proc_row, table, buf, theme);
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
