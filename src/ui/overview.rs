//! Overview: every GPU at a glance. Cards shrink with the terminal (full card,
//! two lines, one line) and scroll around the selected GPU, saying how many are off-screen.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use super::chart::{columns, sparkline};
use super::procs::{render_header, render_row};
use super::theme::Theme;
use crate::app::App;
use crate::model::bytes::{gib1, human};
use crate::model::state::GpuState;

pub fn short_name(name: &str) -> &str {
    name.strip_prefix("NVIDIA ").unwrap_or(name)
}

/// `used 61.2 / 139.8 GiB ████░░░ peak 74.9 GiB (14:02) util 97% 45°C 300 W`, shortened to fit.
pub fn usage_line(g: &GpuState, width: u16, theme: &Theme) -> Line<'static> {
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
            format!(" {}/{}G", gib1(used), gib1(total)),
            theme.pressure(frac),
        ));
        spans.push(Span::styled(
            format!(" pk {}", gib1(g.peak.value)),
            theme.peak(),
        ));
        if w >= 34 {
            spans.push(Span::raw(util));
        }
        return Line::from(spans);
    }
    let head = format!("used {:>5} / {} GiB ", gib1(used), gib1(total));
    let peak = format!(" peak {} ({peak_at})", human(g.peak.value));
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

pub fn render_overview(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let n = s.gpus.len();
    if n == 0 {
        companions_only(app, area, buf, theme);
        return;
    }
    let per = usize::from(area.height) / n;
    if per >= 4 {
        let h = per as u16;
        for (i, g) in s.gpus.iter().enumerate() {
            let r = Rect {
                x: area.x,
                y: area.y + i as u16 * h,
                width: area.width,
                height: h,
            };
            card(app, g, i == app.gpu, r, buf, theme);
            super::alerts::decorate_card(app, i, r, buf, theme);
        }
        return;
    }
    // Compact: rows per GPU = 2 (line + sparkline) or 1; scroll around the selection.
    let rows = if per >= 2 { 2u16 } else { 1 };
    let fit = (usize::from(area.height) / usize::from(rows)).max(1);
    let (first, more_below) = scroll(app.gpu, n, fit);
    let shown = fit.min(n);
    for (slot, i) in (first..first + shown).enumerate() {
        let g = &s.gpus[i];
        let y = area.y + slot as u16 * rows;
        let is_last_slot = slot + 1 == shown;
        if is_last_slot && (more_below > 0 || first > 0) && rows == 1 && shown < n {
            let text = format!(
                " ... {} more GPUs: Tab to scroll ({}/{n})",
                n - shown,
                app.gpu + 1
            );
            buf.set_stringn(area.x, y, text, usize::from(area.width), theme.warn());
            break;
        }
        let r = Rect {
            x: area.x,
            y,
            width: area.width,
            height: rows,
        };
        compact(app, g, i == app.gpu, r, buf, theme);
        super::alerts::decorate_card(app, i, r, buf, theme);
    }
    if shown < n && rows == 2 {
        let text = format!(" {}/{n} {}Tab scrolls", app.gpu + 1, theme.dot());
        let x = area.x + area.width.saturating_sub(text.chars().count() as u16);
        buf.set_string(x, area.y + area.height - 1, text, theme.warn());
    }
}

/// First visible index and how many GPUs are below the window.
fn scroll(sel: usize, n: usize, fit: usize) -> (usize, usize) {
    if n <= fit {
        return (0, 0);
    }
    let first = sel.saturating_sub(fit - 1).min(n - fit);
    (first, n - (first + fit))
}

fn title(g: &GpuState, width: u16) -> String {
    let name = short_name(&g.info.name);
    if width < 50 {
        format!(" GPU{} {name} ", g.info.index)
    } else {
        let bus = g.info.pci_bus_id.trim_start_matches("00000000:");
        format!(" GPU {} · {name} · {bus} ", g.info.index)
    }
}

fn card(app: &App, g: &GpuState, sel: bool, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let mut block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.border());
    let t = title(g, area.width);
    let t = if theme.ascii { t.replace('·', "-") } else { t };
    block = block
        .title(t)
        .title_style(if sel { theme.title() } else { theme.normal() });
    if sel {
        block = block.border_style(theme.title());
    }
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height == 0 {
        return;
    }
    usage_line(g, inner.width, theme).render(Rect { height: 1, ..inner }, buf);
    if inner.height < 2 {
        return;
    }
    let now = s.now;
    let from = now - app.window_ms();
    let label = format!(" last {}", app.window_label());
    let spark_w = inner.width.saturating_sub(label.len() as u16);
    let cols = columns(&g.used, from, now, spark_w);
    let spark = Rect {
        y: inner.y + 1,
        height: 1,
        width: spark_w,
        ..inner
    };
    sparkline(buf, spark, &cols, g.total() as f64, theme, theme.used());
    buf.set_string(inner.x + spark_w, inner.y + 1, label, theme.dim());
    let procs = app.rows_on(g.info.index);
    let rows = usize::from(inner.height.saturating_sub(2));
    let all = s.gpu_infos();
    let mut y = inner.y + 2;
    let pos = s
        .gpus
        .iter()
        .position(|x| x.info.index == g.info.index)
        .unwrap_or(0);
    if !procs.is_empty() && inner.height >= 5 {
        render_header(
            app,
            Rect {
                y,
                height: 1,
                ..inner
            },
            buf,
            theme,
        );
        y += 1;
    }
    let end = inner.y + inner.height;
    let lines = |i: usize| {
        let pid = procs[i].0.info.pid;
        1 + u16::from(s.companions.for_gpu_in(pid, &g.info, all).is_some())
    };
    let first = super::procs::first_visible(app, pos, procs.len(), end.saturating_sub(y), lines);
    for (i, (p, pg)) in procs.iter().enumerate().skip(first) {
        if y >= end {
            break;
        }
        let left = procs.len() - i;
        if y + 1 == end && left > 1 {
            let text = format!("+{left} more processes: Enter for the detail view");
            buf.set_stringn(inner.x, y, text, usize::from(inner.width), theme.dim());
            break;
        }
        let row = Rect {
            x: inner.x,
            y,
            width: inner.width,
            height: 1,
        };
        render_row(app, pos, p, pg, row, buf, theme);
        y += 1;
        let dev = s.companions.for_gpu_in(p.info.pid, &g.info, all);
        if let (Some(d), Some(pa)) = (dev, s.companions.get(p.info.pid)) {
            if y < end && (left == 1 || y + 1 < end) {
                alloc_summary(pa, d, theme).render(Rect { y, ..row }, buf);
                y += 1;
            }
        }
    }
    if procs.is_empty() && rows > 0 && g.error().is_none() {
        buf.set_string(inner.x, inner.y + 2, "no processes", theme.dim());
    }
}

fn compact(app: &App, g: &GpuState, sel: bool, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let head = format!(
        "{}GPU{} {} ",
        if sel { ">" } else { " " },
        g.info.index,
        short_name(&g.info.name)
    );
    let head_w = head.chars().count() as u16;
    buf.set_stringn(
        area.x,
        area.y,
        &head,
        usize::from(area.width),
        if sel { theme.title() } else { theme.normal() },
    );
    let rest = Rect {
        x: area.x + head_w.min(area.width),
        y: area.y,
        width: area.width.saturating_sub(head_w),
        height: 1,
    };
    usage_line(g, rest.width.min(49), theme).render(rest, buf);
    if area.height >= 2 {
        let now = s.now;
        let cols = columns(&g.used, now - app.window_ms(), now, area.width);
        sparkline(
            buf,
            Rect {
                y: area.y + 1,
                height: 1,
                ..area
            },
            &cols,
            g.total() as f64,
            theme,
            theme.used(),
        );
    }
}

/// Second line under a process with a companion: allocator split, fragmentation, epoch.
fn alloc_summary(
    pa: &crate::model::allocator::ProcAlloc,
    d: &crate::model::allocator::DevAlloc,
    theme: &Theme,
) -> Line<'static> {
    let opt = |v: Option<u64>| v.map_or_else(|| "n/a".into(), human);
    let arrow = if theme.ascii { "  `-" } else { "  ↳" };
    let mut spans = vec![
        Span::styled(format!("{arrow} {} ", pa.framework_label()), theme.dim()),
        Span::styled(format!("alloc {}", opt(d.allocated_now())), theme.used()),
        Span::raw(format!(" cached {} ", opt(d.cached_now()))),
    ];
    spans.extend(super::allocator::frag_text(d.frag.as_ref(), theme).spans);
    if let Some(e) = d.epochs.back() {
        spans.push(Span::styled(format!("  epoch {}", e.epoch), theme.dim()));
    }
    Line::from(spans)
}

/// Without NVML (no driver, or a container without it) companions still report: list them
/// with their allocator state per device, since there are no GPU cards to hang them on.
fn companions_only(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let s = app.view_state();
    let procs: Vec<_> = s.companions.by_pid.values().collect();
    if procs.is_empty() {
        let msg = "waiting for the first sample (no GPUs reported yet, no companion connected)";
        buf.set_stringn(area.x, area.y, msg, usize::from(area.width), theme.dim());
        return;
    }
    let head = "no NVML data: allocator state reported by companions";
    buf.set_stringn(area.x, area.y, head, usize::from(area.width), theme.title());
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
        let line = format!("{:>7} {} {cmd}", pa.pid, pa.framework_label());
        buf.set_stringn(area.x, y, line, usize::from(area.width), theme.normal());
        super::procs::mark_companion(app, pa.pid, Rect::new(area.x, y, area.width, 1), buf, theme);
        y += 1;
        for d in pa.devices.values() {
            if y >= area.y + area.height {
                break;
            }
            alloc_summary(pa, d, theme).render(
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
