//! The alert bar (one line, every view) and the alerts panel (list with history, and
//! the evidence of the selected alert). Pure: reads the engine, draws into a buffer.
//! Both fit a 40×12 pane: summaries are at most 38 characters by construction.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::legend;
use super::theme::Theme;
use crate::fmt::{compact, compact_signed};
use crate::model::alerts::{
    Alert, AlertEngine, AlertKind, Evidence, GateName, Severity, StepUnit, TrendSeries, ValueName,
};
use crate::tui::app::{App, Target};
use crate::tui::selection::AlertId;

fn mark(s: Severity, theme: &Theme) -> &'static str {
    match (s, theme.ascii) {
        (Severity::Critical, false) => "‼",
        (Severity::Critical, true) => "!!",
        (Severity::Warning, false) => "⚠",
        (Severity::Warning, true) => "!",
        (Severity::Info, false) => "ℹ",
        (Severity::Info, true) => "i",
    }
}

fn style(s: Severity, theme: &Theme) -> Style {
    match s {
        Severity::Critical => theme.error(),
        Severity::Warning => theme.warn(),
        Severity::Info => theme.normal(),
    }
}

/// Rule messages are written in Unicode (en dashes, ≈, ≥); an ASCII terminal gets
/// plain equivalents, anything else unknown becomes `?`.
pub(crate) fn fold(s: &str, theme: &Theme) -> String {
    if !theme.ascii || s.is_ascii() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '–' | '—' | '−' => out.push('-'),
            '≈' => out.push('~'),
            '≥' => out.push_str(">="),
            '≤' => out.push_str("<="),
            '→' => out.push_str("->"),
            '…' => out.push_str("..."),
            '·' => out.push('-'),
            '✓' => out.push('+'),
            '✗' => out.push('-'),
            c if c.is_ascii() => out.push(c),
            _ => out.push('?'),
        }
    }
    out
}

/// Cut to `width` characters, marking the cut (after folding for ASCII terminals).
fn fit(s: &str, width: usize, theme: &Theme) -> String {
    let s = &fold(s, theme);
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let cut = if theme.ascii { "~" } else { "…" };
    let mut out: String = s.chars().take(width - 1).collect();
    out.push_str(cut);
    out
}

/// Cut to `width` between words (after folding for ASCII terminals): a summary's numbers
/// (`+32.0M/ep`) are kept whole or left out, never cut in the middle.
fn fit_words(s: &str, width: usize, theme: &Theme) -> String {
    let s = fold(s, theme);
    super::text::fit_words(Line::from(s), width, theme.ascii).to_string()
}

/// What the bar says about alerts that have ended: how many, and how many of the worst
/// severity among them (`4 past (‼ 1)`), coloured while any of them is unacknowledged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PastAlerts {
    pub count: usize,
    pub worst: Option<Severity>,
    pub worst_count: usize,
    /// Some of them still mark their card (not acknowledged with `A`).
    pub marked: bool,
}

impl PastAlerts {
    pub fn of(app: &App) -> PastAlerts {
        let all: Vec<&Alert> = app.view_alerts().history().collect();
        let worst = all.iter().map(|a| a.severity).max();
        PastAlerts {
            count: all.len(),
            worst,
            worst_count: all.iter().filter(|a| Some(a.severity) == worst).count(),
            marked: !app.past_marked().is_empty(),
        }
    }

    /// Spellings from the longest to the shortest: `4 past (‼ 1)`, `4 past ‼`, `+4 past`.
    fn texts(&self, theme: &Theme) -> Vec<String> {
        let Some(w) = self.worst else {
            return Vec::new();
        };
        let m = mark(w, theme);
        let n = self.count;
        vec![
            format!("{n} past ({m} {})", self.worst_count),
            format!("{n} past {m}"),
            format!("+{n} past"),
        ]
    }

    fn style(&self, theme: &Theme) -> Style {
        match self.worst {
            Some(w) if self.marked => style(w, theme),
            _ => theme.dim(),
        }
    }
}

/// One line: the most severe visible alert's summary and how many others there are, then
/// the past ones (`… · 4 past (‼ 1)`), so a run that ended in an OOM never reads as an
/// all-clear. `alerts` is `AlertEngine::visible()`: most severe first; `silenced` counts
/// acknowledged ones.
pub fn render_alert_bar(
    alerts: &[&Alert],
    silenced: usize,
    past: PastAlerts,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let w = usize::from(area.width);
    let dot = theme.dot();
    let past_texts = past.texts(theme);
    let line = match alerts.first() {
        None => {
            let none = match (silenced, past.count) {
                (0, 0) => " no alerts".to_string(),
                (0, _) => " no active alerts".to_string(),
                (n, _) => format!(" no new alerts ({n} acknowledged)"),
            };
            let dash = if theme.ascii { "-" } else { "—" };
            // The longest spelling that fits, the key to the panel when there is room.
            let tail = past_texts
                .iter()
                .flat_map(|p| [format!(" {dot} {p} {dash} a"), format!(" {dot} {p}")])
                .find(|t| none.chars().count() + t.chars().count() <= w);
            let mut spans = vec![Span::styled(fit(&none, w, theme), theme.dim())];
            if let Some(t) = tail {
                spans.push(Span::styled(t, past.style(theme)));
            }
            Line::from(spans)
        }
        Some(top) => {
            let m = mark(top.severity, theme);
            // `+2 more` (active alerts besides this one); `+2` when the pane is narrow.
            let more = match alerts.len() {
                0 | 1 => String::new(),
                n if w >= 60 => format!(" +{} more", n - 1),
                n => format!(" +{}", n - 1),
            };
            let fixed = m.chars().count() + 1 + more.chars().count();
            let summary_w = top.summary.chars().count();
            // The past count takes what the summary leaves, in its longest spelling that
            // fits: the summary keeps 30 characters (its number too), or 16 when a past
            // alert was worse than any active one (an OOM behind an info).
            let keep = if past.worst > Some(top.severity) {
                16
            } else {
                30
            };
            let tail = past_texts
                .iter()
                .map(|p| format!(" {dot} {p}"))
                .find(|t| fixed + summary_w.min(keep) + t.chars().count() <= w)
                .unwrap_or_default();
            let room = w.saturating_sub(fixed + tail.chars().count());
            let sev = style(top.severity, theme);
            Line::from(vec![
                Span::styled(format!("{m} "), sev),
                Span::styled(fit_words(&top.summary, room, theme), sev),
                Span::styled(more, theme.dim()),
                Span::styled(tail, past.style(theme)),
            ])
        }
    };
    buf.set_line(area.x, area.y, &line, area.width);
}

/// Tiny sparkline of the evidence series, scaled between its own min and max so a slow
/// creep is visible.
fn spark(ev: &Evidence, width: usize, theme: &Theme) -> String {
    let pts: Vec<u64> = ev.points.iter().map(|p| p.bytes).collect();
    let pts = &pts[pts.len().saturating_sub(width)..];
    let (Some(lo), Some(hi)) = (pts.iter().min(), pts.iter().max()) else {
        return String::new();
    };
    let span = (hi - lo) as f64;
    pts.iter()
        .map(|&v| {
            let f = if span > 0.0 {
                (v - lo) as f64 / span
            } else {
                0.5
            };
            // Never blank: a zero-height bar would read as a gap.
            theme.bar(0.125 + 0.875 * f)
        })
        .collect()
}

/// The series a trend was found in, as one word before its sparkline.
fn series_label(series: Option<&TrendSeries>) -> &str {
    match series {
        Some(TrendSeries::Floor) => "floor",
        Some(TrendSeries::Peak) => "peak",
        Some(TrendSeries::Reserved) => "reserved",
        Some(TrendSeries::AllocatedWindows) => "allocated",
        Some(TrendSeries::NvmlWindows | TrendSeries::NvmlEpochs) => "NVML",
        Some(TrendSeries::InterposerWindows) => "interposer",
        // A series from another build's recording: its first word.
        Some(TrendSeries::Other(s)) => s.split(' ').next().unwrap_or("series"),
        None => "series",
    }
}

/// A byte count's name in a few words (`T free 8.79GiB · L hole 18.0MiB`), each one
/// distinct: the letter of the fragmentation formula where it has one, with what it is
/// (`card` alone once stood for both the card's size and its free bytes).
fn value_label(name: &ValueName) -> &str {
    match name {
        ValueName::FreeInCache => "T free",
        ValueName::LargestHole => "L hole",
        ValueName::FromCard => "D room",
        ValueName::LargestRequest => "R largest",
        ValueName::Requested => "asked",
        ValueName::CardFree => "card free",
        ValueName::CardTotal => "card size",
        ValueName::Reserved => "reserved",
        ValueName::AllocatorLimit => "limit",
        ValueName::OtherProcesses => "others hold",
        ValueName::HeldNvml => "held",
        ValueName::Allocated => "allocated",
        ValueName::Headroom => "headroom",
        ValueName::TypicalRequest => "typical ask",
        ValueName::RecurringRequest => "R recurring",
        ValueName::NeededHole => "hole needed",
        // A name from another build's recording: as it was written.
        ValueName::Other(n) => n,
    }
}

/// A gate as one word for the evidence line (`gates ✓ p slope growth`): the quantity it
/// tests, or what it rules out where the name is a phrase.
fn gate_label(name: &GateName) -> &str {
    match name {
        GateName::MannKendallP => "p",
        GateName::Slope => "slope",
        GateName::Growth => "growth",
        GateName::GrowthVsNoise => "noise",
        GateName::Sustained => "sustained",
        GateName::NotAJump => "spread",
        GateName::MedianStep => "median",
        GateName::NewHigh => "high",
        GateName::FitsTotal | GateName::FreeShare => "T",
        GateName::FitsNoHole | GateName::FitsNoHoleAtPeak => "R",
        GateName::FragIndex => "F",
        GateName::Retries | GateName::AllocatorShare => "allocator",
        GateName::HeldShare | GateName::HeldShareNvml => "held",
        GateName::Headroom => "headroom",
        GateName::CacheOnly => "D",
        GateName::SpareHoles => "holes",
        GateName::HoleMargin => "margin",
        GateName::ExcessGrowth => "excess",
        GateName::Widening => "widening",
        // A gate from another build's recording: its first word.
        GateName::Other(n) => n.split([' ', '=']).next().unwrap_or(""),
    }
}

/// Evidence lines, most useful first (the pane may cut the rest).
fn evidence_lines(a: &Alert, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let ev = &a.evidence;
    let dot = theme.dot();
    let mut out = Vec::new();
    let mut raised = format!("raised {}", theme.clock(a.raised_at));
    if let Some(e) = a.raised_epoch {
        raised.push_str(&format!(" epoch {e}"));
    }
    raised.push_str(&format!(" {dot} {}", a.severity.label()));
    if let Some(c) = a.cleared_at {
        raised.push_str(&format!(" {dot} cleared {}", theme.clock(c)));
    } else if a.silenced {
        raised.push_str(&format!(" {dot} ack"));
    }
    out.push(Line::from(Span::styled(raised, theme.dim())));
    if !ev.points.is_empty() {
        let name = series_label(ev.series.as_ref());
        let first = ev.points.first().map_or(0, |p| p.bytes);
        let last = ev.points.last().map_or(0, |p| p.bytes);
        let arrow = if theme.ascii { "->" } else { "→" };
        let tail = format!(" {}{arrow}{}", compact(first), compact(last));
        let room = width
            .saturating_sub(name.chars().count() + 1 + tail.chars().count())
            .max(4);
        out.push(Line::from(vec![
            Span::raw(format!("{name} ")),
            Span::styled(spark(ev, room, theme), theme.used()),
            Span::styled(tail, theme.dim()),
        ]));
    }
    if let Some(slope) = ev.slope {
        let unit = match &ev.unit {
            Some(StepUnit::Epoch) => "ep",
            Some(StepUnit::Window) => "win",
            Some(StepUnit::Other(u)) => u,
            None => "step",
        };
        let mut s = format!("slope {}/{unit}", compact_signed(slope));
        if let Some(p) = ev.p_value {
            s.push_str(&format!(
                " {dot} p {}",
                if p < 1e-4 {
                    format!("{p:.0e}")
                } else {
                    format!("{p:.4}")
                }
            ));
        }
        s.push_str(&format!(" {dot} n {}", ev.points.len()));
        out.push(Line::from(s));
    }
    if let Some(f) = &ev.forecast {
        let unit = if ev.unit == Some(StepUnit::Epoch) {
            "ep"
        } else {
            "win"
        };
        let mut s = if f.steps >= 1e6 {
            "no OOM at this rate".to_string()
        } else {
            format!(
                "OOM in {}{:.0} {unit}",
                if theme.ascii { "~" } else { "≈" },
                f.steps
            )
        };
        if let Some(ms) = f.ms.filter(|_| f.steps < 1e6) {
            s.push_str(&format!(", {}", crate::fmt::rough_duration(ms)));
        }
        s.push_str(&format!(" {dot} ceil {}", compact(f.ceiling)));
        out.push(Line::from(Span::styled(s, style(a.severity, theme))));
    }
    if !ev.values.is_empty() {
        let s: Vec<String> = ev
            .values
            .iter()
            .map(|n| format!("{} {}", value_label(&n.name), compact(n.bytes)))
            .collect();
        out.push(Line::from(s.join(&format!(" {dot} "))));
    }
    if !ev.gates.is_empty() {
        let (ok, bad) = if theme.ascii {
            ("+", "-")
        } else {
            ("✓", "✗")
        };
        let names = |passed: bool| -> Vec<&str> {
            ev.gates
                .iter()
                .filter(|g| g.passed == passed)
                .map(|g| gate_label(&g.name))
                .collect()
        };
        let mut spans = vec![Span::styled("gates", theme.dim())];
        let (good, failed) = (names(true), names(false));
        if !good.is_empty() {
            spans.push(Span::styled(
                format!(" {ok} {}", good.join(" ")),
                theme.used(),
            ));
        }
        if !failed.is_empty() {
            spans.push(Span::styled(
                format!(" {bad} {}", failed.join(" ")),
                theme.dim(),
            ));
        }
        out.push(Line::from(spans));
    }
    out
}

/// The panel: a list of alerts (active, then history) with the evidence and message of
/// the `selected` one below it (for tests and callers without an `App`).
pub fn render_alerts_panel(
    engine: &AlertEngine,
    selected: usize,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    let mut p = super::paint::Painter::new(buf);
    panel(&mut p, engine, None, selected, 0, area, theme);
}

/// The panel as the app shows it: its selection, its scroll position, click targets;
/// each part a piece of its own, so nothing in it is drawn over another part.
pub(crate) fn paint_panel(p: &mut super::paint::Painter, app: &App, area: Rect, theme: &Theme) {
    panel(
        p,
        app.view_alerts(),
        Some(app),
        app.alert_row,
        app.alert_scroll,
        area,
        theme,
    );
}

/// `PID 786 on GPU 1 (786@1)`: the alert's subject written out, with the short form the
/// bar uses so the two can be matched up; a rank of a job says so
/// (`PID 635 [rank 1] train.py on GPU 0 (635@0)`).
fn subject(a: &Alert, app: Option<&App>) -> String {
    match a.pid {
        Some(pid) => {
            let who = app
                .and_then(|app| app.view_state().procs.get(&pid))
                .and_then(|p| p.who.rank.is_some().then(|| p.who.ranked_label()).flatten())
                .map(|l| format!(" {l}"))
                .unwrap_or_default();
            format!("PID {pid}{who} on GPU {} ({pid}@{})", a.gpu, a.gpu)
        }
        None => format!("GPU {}", a.gpu),
    }
}

/// The most epochs any companion, connected or ended, has reported on one device.
fn most_epochs(app: &App) -> u64 {
    let c = &app.view_state().companions;
    c.by_pid
        .values()
        .chain(c.ended.values())
        .flat_map(|p| p.devices.values())
        .filter_map(|d| d.epochs.back().map(|e| e.epoch + 1))
        .max()
        .unwrap_or(0)
}

fn panel(
    p: &mut super::paint::Painter,
    engine: &AlertEngine,
    app: Option<&App>,
    selected: usize,
    scroll: u16,
    area: Rect,
    theme: &Theme,
) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let items = engine.listed();
    let active = engine.active().len();
    let w = usize::from(area.width);
    let selected = selected.min(items.len().saturating_sub(1));
    let rows_left = usize::from(area.height - 1);
    // The list takes up to a third of the pane (at least 1 row), the evidence the rest.
    let list_rows = items.len().min((rows_left / 3).max(1)).min(rows_left);
    // Two rows or fewer: both for alerts, the hidden ones counted in the title.
    let win = if list_rows < 3 {
        super::scroll::plain(items.len(), selected, list_rows)
    } else {
        super::scroll::window(items.len(), selected, list_rows)
    };
    let title = format!("Alerts {active} active, {} past", items.len() - active);
    // Hidden alerts without a line of their own are counted in the title.
    let mut hidden = Vec::new();
    if win.above > 0 && !win.line_above {
        hidden.push(format!("+{} above", win.above));
    }
    if win.below > 0 && !win.line_below {
        hidden.push(format!("+{} below", win.below));
    }
    let hidden = if hidden.is_empty() {
        String::new()
    } else {
        format!(" {} {}", theme.dot(), hidden.join(" "))
    };
    let keys = format!(" {0} Enter go to it {0} A ack {0} Esc back", theme.dot());
    let title = [
        format!("{title}{hidden}{keys}"),
        format!("{title}{hidden}"),
        title.clone(),
    ]
    .into_iter()
    .find(|t| t.chars().count() <= w)
    .unwrap_or(title);
    p.paint("alerts title", |buf| {
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(fit(&title, w, theme), theme.title())),
            area.width,
        )
    });
    if items.is_empty() {
        if area.height > 1 {
            let msg = match app.map(most_epochs).unwrap_or(0) {
                // Enough epochs for every rule to have judged: say so, not "nothing yet".
                n if n >= 8 => format!(
                    "No alerts: the growth, fragmentation, OOM and grab-all rules ran over {n} epochs and none fired."
                ),
                _ => "Nothing yet. Growth alerts need 6 epochs after warm-up (or six 10-minute windows).".to_string(),
            };
            let r = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
            p.paint("no alerts", |buf| {
                Paragraph::new(msg)
                    .style(theme.dim())
                    .wrap(Wrap { trim: true })
                    .render(r, buf)
            });
        }
        return;
    }
    let line_at = |y: u16| Rect::new(area.x, y, area.width, 1);
    let first_y = area.y + 1 + u16::from(win.line_above);
    let (above, below) = super::scroll::texts(&win);
    if let Some(t) = above {
        p.paint("alerts above", |buf| {
            super::scroll::indicator(line_at(area.y + 1), &t, buf, theme)
        });
    }
    for (row, (i, a)) in items
        .iter()
        .enumerate()
        .skip(win.first)
        .take(win.shown)
        .enumerate()
    {
        let y = first_y + row as u16;
        let past = a.cleared_at.is_some();
        let m = if past {
            legend::PAST
                .sym(theme.ascii)
                .split(' ')
                .next()
                .unwrap_or("")
        } else {
            mark(a.severity, theme)
        };
        // Dim reversed is unreadable on many themes: the selected row is never dim.
        let st = if (past || a.silenced) && i != selected {
            theme.dim()
        } else if past || a.silenced {
            theme.normal()
        } else {
            style(a.severity, theme)
        };
        let mut text = format!("{m} {}", a.summary);
        let rank = a
            .pid
            .and_then(|pid| app?.view_state().procs.get(&pid)?.who.rank)
            .map(|r| format!(" [rank {r}]"))
            .unwrap_or_default();
        let spelled = match a.pid {
            Some(pid) => format!("  PID {pid}{rank} on GPU {}", a.gpu),
            None => String::new(),
        };
        if text.chars().count() + spelled.len() <= w {
            text.push_str(&spelled);
        }
        let mut line = Line::from(Span::styled(fit_words(&text, w, theme), st));
        if i == selected {
            line = line.patch_style(theme.selected());
        }
        p.paint("alert row", |buf| {
            buf.set_line(area.x, y, &line, area.width)
        });
        if let Some(app) = app {
            app.hit(line_at(y), Target::Alert(AlertId::of(a)));
        }
    }
    if let Some(t) = below {
        let y = first_y + win.shown as u16;
        p.paint("alerts below", |buf| {
            super::scroll::indicator(line_at(y), &t, buf, theme)
        });
    }
    let detail_y = area.y + 1 + list_rows as u16;
    let detail_h = area.height.saturating_sub(1 + list_rows as u16);
    if detail_h == 0 {
        return;
    }
    let a = items[selected];
    let mut lines = vec![Line::from(Span::styled(subject(a, app), theme.title()))];
    // Each label stays on the line of its value (`allocator 4.00GiB`).
    lines.extend(
        evidence_lines(a, w, theme)
            .into_iter()
            .flat_map(|l| super::text::wrap_pieces(l, w, theme.ascii)),
    );
    lines.extend(
        super::wrap::words(&a.message, w)
            .into_iter()
            .map(Line::from),
    );
    if theme.ascii {
        for l in &mut lines {
            for sp in &mut l.spans {
                sp.content = fold(&sp.content, theme).into();
            }
        }
    }
    // Rows the text leaves free below it hold the alert's chart (alert_chart.rs).
    let name = series_label(a.evidence.series.as_ref());
    let (lines, chart_h) = super::alert_chart::place(lines, a, app, name, area.width, detail_h);
    if chart_h > 0 {
        let r = Rect::new(area.x, detail_y + detail_h - chart_h, area.width, chart_h);
        p.paint("alert chart", |buf| {
            super::alert_chart::render(buf, r, (a, name), app, theme)
        });
    }
    super::wrap::paint_scrolled(
        p,
        lines,
        scroll,
        Rect::new(area.x, detail_y, area.width, detail_h - chart_h),
        theme,
    );
}

/// The mark drawn in the first column of the process row of `pid` on GPU `gpu` (NVML
/// index): its worst active, unacknowledged alert; else the worst past one not yet
/// acknowledged, in its colour on a process that has ended (its alerts ended with it),
/// dim on one that runs on.
pub fn row_mark(app: &App, pid: u32, gpu: u32, theme: &Theme) -> Option<(&'static str, Style)> {
    rows_mark(app, &[pid], gpu, theme)
}

/// The mark of a row that stands for several processes (a folded job): their worst.
pub fn rows_mark(
    app: &App,
    pids: &[u32],
    gpu: u32,
    theme: &Theme,
) -> Option<(&'static str, Style)> {
    let about = |a: &&Alert| a.pid.is_some_and(|p| pids.contains(&p)) && a.gpu == gpu;
    let active = app.view_alerts().active();
    if let Some(s) = active
        .into_iter()
        .filter(|a| !a.silenced && about(a))
        .map(|a| a.severity)
        .max()
    {
        return Some((mark(s, theme), style(s, theme)));
    }
    let s = app
        .past_marked()
        .into_iter()
        .filter(about)
        .map(|a| a.severity)
        .max()?;
    let ended = pids.iter().any(|pid| {
        app.view_state()
            .procs
            .get(pid)
            .is_some_and(|p| p.exit.is_some())
    });
    Some((
        mark(s, theme),
        if ended { style(s, theme) } else { theme.dim() },
    ))
}

/// The most severe active fragmentation alert (risk or OOM) of a process on a GPU: what the
/// allocator line colours F and stranded by, acknowledged ones included.
pub fn frag_risk(app: &App, pid: u32, gpu: u32) -> Option<Severity> {
    app.view_alerts()
        .active()
        .into_iter()
        .filter(|a| a.pid == Some(pid) && a.gpu == gpu)
        .filter(|a| {
            matches!(
                a.kind,
                AlertKind::FragmentationRisk | AlertKind::FragmentationOom
            )
        })
        .map(|a| a.severity)
        .max()
}

/// On a GPU card (or compact row): the worst active alert about the card (or any process
/// on it) and how many there are, as ` ‼ 2 `, then the worst past one not acknowledged
/// and how many, as ` past ‼ 1 ` (until `A`); and the card as a click target. The caller
/// draws the mark in its own title (the card's top border, the compact row's name), so it
/// goes through the same painted piece and never covers the scale note.
pub fn decorate_card(app: &App, pos: usize, area: Rect, theme: &Theme) -> Option<Span<'static>> {
    card_mark(app, pos, area, theme, 0)
}

/// `decorate_card` for a compact GPU row, which shares its one line with the usage and a
/// sparkline: without the dot, and the past only when it was worse than every active alert
/// (`tight`: the active mark alone whenever there is one, for a row with no room to spare).
pub fn decorate_row(
    app: &App,
    pos: usize,
    area: Rect,
    theme: &Theme,
    tight: bool,
) -> Option<Span<'static>> {
    card_mark(app, pos, area, theme, if tight { 2 } else { 1 })
}

/// `short`: 0 on a card's border, 1 on a compact row, 2 on a tight one.
fn card_mark(app: &App, pos: usize, area: Rect, theme: &Theme, short: u8) -> Option<Span<'static>> {
    app.hit(area, Target::Gpu(pos));
    let g = app.view_state().gpus.get(pos)?;
    let on: Vec<Severity> = app
        .view_alerts()
        .active()
        .into_iter()
        .filter(|a| !a.silenced && a.gpu == g.info.index)
        .map(|a| a.severity)
        .collect();
    let past: Vec<Severity> = app
        .past_marked()
        .into_iter()
        .filter(|a| a.gpu == g.info.index)
        .map(|a| a.severity)
        .collect();
    let worst = |v: &[Severity]| v.iter().max().copied();
    let text = match (worst(&on), worst(&past)) {
        (None, None) => return None,
        (Some(a), None) => format!(" {} {} ", mark(a, theme), on.len()),
        (None, Some(p)) => format!(" past {} {} ", mark(p, theme), past.len()),
        // A compact row names the past only when it was worse than anything active.
        (Some(a), Some(p)) if short == 1 && p > a => format!(
            " {} {} past {} {} ",
            mark(a, theme),
            on.len(),
            mark(p, theme),
            past.len()
        ),
        (Some(a), Some(_)) if short > 0 => format!(" {} {} ", mark(a, theme), on.len()),
        (Some(a), Some(p)) => format!(
            " {} {} {} past {} {} ",
            mark(a, theme),
            on.len(),
            theme.dot(),
            mark(p, theme),
            past.len()
        ),
    };
    // Coloured by the worst active alert; past ones alone are what the card remembers.
    let st = match (worst(&on), worst(&past)) {
        (Some(a), _) => style(a, theme),
        (None, Some(p)) => style(p, theme),
        (None, None) => theme.dim(),
    };
    Some(Span::styled(text, st))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panel showed each gate by matching on its text; the labels must not move.
    #[test]
    fn gate_labels_are_the_words_the_panel_showed_before() {
        let before = |name: &str| match name {
            "Mann–Kendall p" => "p".to_string(),
            "growth vs noise" => "noise".to_string(),
            "not a jump" => "spread".to_string(),
            // newer than that panel: its word is the one that says what it tests
            "new high" => "high".to_string(),
            n => n.split([' ', '=']).next().unwrap_or("").to_string(),
        };
        for &name in GateName::KNOWN {
            assert_eq!(gate_label(&GateName::from(name)), before(name), "{name}");
        }
        assert_eq!(gate_label(&GateName::from("σ = 3 noise")), "σ");
    }

    #[test]
    fn series_labels_are_the_first_word_as_before() {
        for &name in TrendSeries::KNOWN {
            let first = name.split(' ').next().unwrap_or("series");
            assert_eq!(series_label(Some(&TrendSeries::from(name))), first);
        }
        assert_eq!(series_label(Some(&TrendSeries::from("swap usage"))), "swap");
        assert_eq!(series_label(None), "series");
    }

    #[test]
    fn value_labels_are_distinct_and_say_what_they_count() {
        let labels: Vec<String> = ValueName::KNOWN
            .iter()
            .map(|&n| value_label(&ValueName::from(n)).to_string())
            .collect();
        let mut unique = labels.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            labels.len(),
            "two names share a label: {labels:?}"
        );
        assert!(
            labels.iter().all(|l| !l.is_empty() && l.len() <= 12),
            "{labels:?}"
        );
        // The review's line: card total and card free both read `card`.
        assert_eq!(value_label(&ValueName::CardFree), "card free");
        assert_eq!(value_label(&ValueName::CardTotal), "card size");
        assert_eq!(
            value_label(&ValueName::from("T")),
            "T",
            "another build's name"
        );
    }
}
