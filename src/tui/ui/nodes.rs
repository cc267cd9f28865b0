//! The node list of `--prometheus`: one row per node (or per job across nodes, `J`), the
//! worst first, with what each says about itself and how old that is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::paint::Painter;
use super::put;
use super::theme::Theme;
use crate::model::alerts::Severity;
use crate::model::fleet::{FleetJob, Node, NodeAlert};
use crate::tui::app::{App, FleetView};

pub(crate) fn render(p: &mut Painter, app: &App, area: Rect, theme: &Theme) {
    let Some(fv) = app.fleet.as_deref() else {
        return;
    };
    if area.height == 0 {
        return;
    }
    p.paint("fleet summary", |buf| {
        put::row(
            buf,
            area,
            area.y,
            summary(fv, usize::from(area.width)),
            theme.title(),
        )
    });
    let list = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    if fv.jobs {
        p.paint("job list", |buf| jobs(fv, list, buf, theme));
    } else {
        p.paint("node list", |buf| nodes(fv, list, buf, theme));
    }
}

/// `3 nodes, 1 stale · 24 GPUs · 812.4 of 3369.6 GiB · by worst · 8 ms, 1.2 KiB`, its
/// later parts dropped where they do not fit.
fn summary(fv: &FleetView, width: usize) -> String {
    let f = &fv.fleet;
    // Totals of the nodes listed: with a selector, of the nodes it selects.
    let rows = fv.rows();
    let stale = rows.iter().filter(|n| n.stale_ms(f.at).is_some()).count();
    let used: u64 = rows.iter().map(|n| n.used()).sum();
    let total: u64 = rows.iter().map(|n| n.total()).sum();
    let gpus: usize = rows.iter().map(|n| n.gpus.len()).sum();
    let mut s = format!("{} nodes", f.nodes.len());
    if rows.len() != f.nodes.len() {
        s = format!("{} of {s} ({})", rows.len(), fv.selector_text.trim());
    }
    if stale > 0 {
        s.push_str(&format!(", {stale} stale"));
    }
    let mut more = vec![
        format!(" · {gpus} GPUs"),
        format!(" · {} of {}", tib_or_gib(used), tib_or_gib(total)),
        format!(
            " · by {}{}",
            fv.sort.label(),
            if fv.invert { " ↑" } else { "" }
        ),
    ];
    if fv.status.error.is_none() && fv.read_at.is_some() {
        more.push(format!(
            " · {} ms, {}",
            fv.status.took_ms,
            crate::fmt::human(fv.status.wire_bytes as u64)
        ));
    }
    for part in more {
        if s.chars().count() + part.chars().count() > width {
            break;
        }
        s.push_str(&part);
    }
    s
}

/// A fleet's memory: TiB past 10 TiB, where GiB grows to six digits.
fn tib_or_gib(b: u64) -> String {
    if b >= 10 << 40 {
        format!("{:.1} TiB", b as f64 / (1u64 << 40) as f64)
    } else {
        format!("{} GiB", crate::fmt::gib1(b))
    }
}

/// Columns that fit `w`: name, GPUs, fullest GPU, alert always; memory from 60 columns,
/// the bar from 90, jobs from 100.
struct Cols {
    name: usize,
    mem: bool,
    bar: usize,
    alert: usize,
    jobs: bool,
}

fn cols(w: usize) -> Cols {
    let mem = w >= 60;
    let bar = if w >= 90 { 10 } else { 0 };
    let jobs = w >= 100;
    let name = if w >= 120 {
        22
    } else if w >= 60 {
        16
    } else {
        12
    };
    let alert = if jobs {
        36
    } else {
        w.saturating_sub(name + 5 + 5 + if mem { 13 } else { 0 } + bar)
    };
    Cols {
        name,
        mem,
        bar,
        alert,
        jobs,
    }
}

fn pad(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    let len = out.chars().count();
    if len == n && s.chars().count() > n && n > 1 {
        out = s.chars().take(n - 1).collect::<String>() + "…";
    }
    format!("{out:<n$}")
}

fn nodes(fv: &FleetView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let w = usize::from(area.width);
    let c = cols(w);
    let mut head = format!("{} {:>4} ", pad("NODE", c.name), "GPUS");
    if c.mem {
        head.push_str(&format!("{:>12} ", "USED/TOTAL"));
    }
    head.push_str(&format!("{:>4} ", "FULL"));
    if c.bar > 0 {
        head.push_str(&" ".repeat(c.bar + 1));
    }
    head.push_str(&pad("ALERT / STATE", c.alert));
    if c.jobs {
        head.push_str(" JOBS");
    }
    put::row(buf, area, area.y, head, theme.dim());
    let rows = fv.rows();
    let height = usize::from(area.height.saturating_sub(1));
    if rows.is_empty() {
        let why = if fv.fleet.nodes.is_empty() {
            if fv.read_at.is_none() {
                "asking Prometheus…"
            } else {
                "Prometheus holds no gpumon series: is `gpumon serve` scraped? (docs/cluster.md)"
            }
        } else {
            "no node matches the selector (/ to change it)"
        };
        if height > 0 {
            put::row(buf, area, area.y + 1, why, theme.dim());
        }
        return;
    }
    let first = fv.row.saturating_sub(height.saturating_sub(1));
    for (i, n) in rows.iter().enumerate().skip(first).take(height) {
        let y = area.y + 1 + (i - first) as u16;
        let selected = i == fv.row;
        let stale = n.stale_ms(fv.fleet.at);
        let base = if stale.is_some() {
            theme.dim()
        } else {
            theme.normal()
        };
        let style = if selected { theme.selected() } else { base };
        let mut x = area.x;
        let mut cell = |buf: &mut Buffer, s: String, st: Style| {
            let (nx, _) = put::stringn(
                buf,
                x,
                y,
                &s,
                usize::from(area.right().saturating_sub(x)),
                st,
            );
            x = nx;
        };
        cell(buf, format!("{} ", pad(&n.name, c.name)), style);
        cell(buf, format!("{:>4} ", n.gpus.len()), base);
        if c.mem {
            let mem = if n.gpus.is_empty() {
                "?".to_string()
            } else {
                format!(
                    "{}/{}",
                    crate::fmt::gib1(n.used()),
                    crate::fmt::gib1(n.total())
                )
            };
            cell(buf, format!("{mem:>12} "), base);
        }
        let full = n.fullest();
        cell(
            buf,
            full.map_or("   ?".into(), |f| {
                format!("{:>3}%", (f * 100.0).round() as u32)
            }) + " ",
            full.map_or(base, |f| {
                if stale.is_some() {
                    base
                } else {
                    theme.pressure(f)
                }
            }),
        );
        if c.bar > 0 {
            let f = full.unwrap_or(0.0);
            let filled = ((f * c.bar as f64).round() as usize).min(c.bar);
            let bar: String = std::iter::repeat_n(theme.full(), filled)
                .chain(std::iter::repeat_n(theme.empty(), c.bar - filled))
                .collect();
            cell(
                buf,
                bar + " ",
                if stale.is_some() {
                    base
                } else {
                    theme.pressure(f)
                },
            );
        }
        let (text, st) = state_cell(n, stale, theme);
        cell(
            buf,
            pad(&text, c.alert),
            if stale.is_some() && st == theme.normal() {
                base
            } else {
                st
            },
        );
        if c.jobs {
            let jobs = n.jobs();
            let what = if jobs.is_empty() { n.programs() } else { jobs };
            cell(buf, format!(" {}", what.join(", ")), theme.dim());
        }
    }
}

/// The worst alert, then how the node itself is: stale with its age, sampler down.
fn state_cell(n: &Node, stale: Option<i64>, theme: &Theme) -> (String, Style) {
    let mut parts = Vec::new();
    let mut style = theme.normal();
    if let Some(a) = n.worst_alert() {
        parts.push(alert_words(a, theme));
        style = severity_style(a.severity, theme);
        if n.alerts.len() > 1 {
            parts.push(format!("+{}", n.alerts.len() - 1));
        }
    }
    if let Some(ms) = stale {
        parts.insert(0, format!("STALE {}", crate::fmt::duration(ms)));
        style = theme.warn();
    } else if !n.up {
        parts.insert(0, "no sample".into());
        style = theme.warn();
    } else if n.gpus.iter().any(|g| !g.up) {
        parts.insert(0, "GPU unreadable".into());
        style = theme.error();
    }
    if parts.is_empty() {
        parts.push("ok".into());
    }
    (parts.join(" "), style)
}

fn severity_style(s: Severity, theme: &Theme) -> Style {
    match s {
        Severity::Critical => theme.error(),
        Severity::Warning => theme.warn(),
        Severity::Info => theme.normal(),
    }
}

fn mark(s: Severity, theme: &Theme) -> &'static str {
    match (s, theme.ascii) {
        (Severity::Critical, false) => "‼",
        (Severity::Critical, true) => "!!",
        (Severity::Warning, _) => theme.warn_sign(),
        (Severity::Info, _) => "i",
    }
}

fn alert_words(a: &NodeAlert, theme: &Theme) -> String {
    let kind = a.kind.replace('_', " ");
    let mut s = format!("{} {kind}", mark(a.severity, theme));
    if let Some(g) = a.gpu {
        s.push_str(&format!(" GPU{g}"));
    }
    if let Some(secs) = a.exhaustion_s.filter(|s| s.is_finite() && *s >= 0.0) {
        s.push_str(&format!(
            " OOM {}",
            crate::fmt::rough_duration((secs * 1000.0) as i64)
        ));
    }
    s
}

fn jobs(fv: &FleetView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let w = usize::from(area.width);
    let name_w = (w / 3).clamp(12, 40);
    put::row(
        buf,
        area,
        area.y,
        format!(
            "{} {:>5} {:>5} {:>9}  TOP RANK",
            pad("JOB", name_w),
            "RANKS",
            "NODES",
            "USED"
        ),
        theme.dim(),
    );
    let all: Vec<FleetJob> = fv.fleet.jobs();
    let height = usize::from(area.height.saturating_sub(1));
    if all.is_empty() {
        if height > 0 {
            put::row(
                buf,
                area,
                area.y + 1,
                "no distributed job: no process carries a `job` label",
                theme.dim(),
            );
        }
        return;
    }
    let first = fv.row.saturating_sub(height.saturating_sub(1));
    for (i, j) in all.iter().enumerate().skip(first).take(height) {
        let y = area.y + 1 + (i - first) as u16;
        let mut style = match j.worst {
            Some(s) => severity_style(s, theme),
            None => theme.normal(),
        };
        if i == fv.row {
            style = theme.selected();
        }
        let top = j
            .top
            .as_ref()
            .map(|(node, pid, used)| format!("{node} PID {pid} {} GiB", crate::fmt::gib1(*used)))
            .unwrap_or_default();
        let mut line = format!(
            "{} {:>5} {:>5} {:>9}  {top}",
            pad(&j.name, name_w),
            j.ranks.len(),
            j.nodes,
            format!("{} GiB", crate::fmt::gib1(j.used)),
        );
        if let Some(s) = j.worst {
            line.push_str(&format!("  {} alert", mark(s, theme)));
        }
        if j.stale {
            line.push_str("  STALE rank");
        }
        put::row(buf, area, y, line, style);
    }
}

/// The alert bar over the node list: the fleet's worst alert with its node, and how many
/// more there are on how many nodes.
pub(crate) fn render_fleet_bar(fv: &FleetView, area: Rect, buf: &mut Buffer, theme: &Theme) {
    let all = fv.fleet.alerts();
    let Some((n, a)) = all.first() else {
        put::row(buf, area, area.y, "no alerts on any node", theme.dim());
        return;
    };
    let mut nodes: Vec<&str> = all.iter().map(|(n, _)| n.name.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let who = a.pid.map(|pid| {
        let name = n
            .procs
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.process.as_deref())
            .unwrap_or("");
        format!(" PID {pid} {name}")
    });
    let mut text = format!(
        "{}: {}{}",
        n.name,
        alert_words(a, theme),
        who.unwrap_or_default()
    );
    if all.len() > 1 {
        text.push_str(&format!(
            "  (+{} more on {} node{})",
            all.len() - 1,
            nodes.len(),
            if nodes.len() == 1 { "" } else { "s" }
        ));
    }
    put::row(
        buf,
        area,
        area.y,
        text.trim_end(),
        severity_style(a.severity, theme),
    );
}
