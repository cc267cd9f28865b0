//! Process rows: pid, user, command, the process's own device index, used and peak.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::legend;
use super::theme::Theme;
use crate::fmt::human;
use crate::model::exit::ExitCause;
use crate::model::mapping::Mapping;
use crate::model::state::{ProcGpu, ProcState};
use crate::model::time::Ts;
use crate::tui::app::{App, Target};
use crate::tui::selection::SortKey;

/// The command line with paths shortened to their last component, so the part that tells
/// runs apart (`train_bert.py --lr 3e-4`) survives a narrow column.
fn command(p: &ProcState) -> String {
    let cmd = match &p.info.cmdline {
        Some(c) => c
            .split(' ')
            .map(|arg| match arg.rsplit_once('/') {
                Some((_, base)) if !base.is_empty() && !arg.starts_with('-') => base,
                _ => arg,
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => p
            .info
            .name
            .clone()
            .unwrap_or_else(|| "(not readable)".into()),
    };
    // Which rank of a distributed job this is: the question when one rank leaks.
    match p.info.rank {
        Some(r) => format!("[rank {r}] {cmd}"),
        None => cmd,
    }
}

fn mapping_style(m: &Mapping, theme: &Theme) -> ratatui::style::Style {
    match m {
        Mapping::Hidden => theme.error(),
        Mapping::Logical {
            uncertain: Some(_), ..
        } => theme.warn(),
        Mapping::Unknown => theme.dim(),
        Mapping::Logical { .. } => theme.normal(),
    }
}

/// `n/a` when NVML gave no number; `gone` when NVML no longer lists the process (for
/// a few seconds, or while its companion still talks); once it has ended, how: `exited`,
/// `OOM` or `killed` (the row stays, with its last state, `keep_exited` long).
fn used_label(p: &ProcState, pg: &ProcGpu, now: Ts) -> String {
    if let Some(e) = p.exit {
        return e.cause.label().into();
    }
    match pg.last_used {
        Some(u) => human(u),
        None if pg.last_seen < now => legend::GONE.sym.into(),
        None => legend::NA.sym.into(),
    }
}

fn used_style(p: &ProcState, theme: &Theme) -> ratatui::style::Style {
    match p.exit.map(|e| e.cause) {
        None => theme.used(),
        Some(ExitCause::Oom) => theme.error(),
        Some(ExitCause::Killed) => theme.warn(),
        Some(ExitCause::Exited) => theme.dim(),
    }
}

/// One process row for the overview cards, shortened to `width`.
pub fn proc_line(p: &ProcState, pg: &ProcGpu, width: u16, theme: &Theme) -> Line<'static> {
    proc_line_at(p, pg, width, theme, pg.last_seen, None)
}

/// `+1.20 GiB/m`: the GROWTH sort's rate (`model::growth_rate`), `–` while unknown.
pub fn growth_label(rate: Option<f64>, theme: &Theme) -> String {
    let Some(g) = rate else {
        return if theme.ascii {
            "-".into()
        } else {
            "–".into()
        };
    };
    let sign = if g < 0.0 { "-" } else { "+" };
    format!(
        "{sign}{}{}",
        human(g.abs().round() as u64),
        legend::PER_MIN.sym
    )
}

/// The row; with `growth` the last column is the growth rate (sorted by it) instead of
/// the peak.
fn proc_line_at(
    p: &ProcState,
    pg: &ProcGpu,
    width: u16,
    theme: &Theme,
    now: Ts,
    growth: Option<Option<f64>>,
) -> Line<'static> {
    let w = usize::from(width);
    let user = p.info.user.clone().unwrap_or_else(|| "?".into());
    let used = format!("{:>9}", used_label(p, pg, now));
    let peak = if let Some(rate) = growth {
        format!(" {:>12}", growth_label(rate, theme))
    } else {
        // Under the PEAK title: the number alone (it was `pk 24.6 GiB`, a second label).
        format!(" {:>12}", human(pg.peak.value))
    };
    let map = format!(" {:<8}", pg.mapping.label());
    let head = if w < 50 {
        format!("{:>7} ", p.info.pid)
    } else {
        format!("{:>7} {:<8.8} ", p.info.pid, user)
    };
    let tail_w = used.len() + map.len() + if w >= 50 { peak.len() } else { 0 };
    let mut cmd_w = w.saturating_sub(head.len() + tail_w + 1);
    // When it ended, where the command column has room to spare for it.
    let ended = p
        .exit
        .map(|e| format!(" ended {}", theme.clock(e.at)))
        .filter(|t| cmd_w >= 24 + t.len());
    cmd_w -= ended.as_ref().map_or(0, String::len);
    let cmd = super::text::fit_command(&command(p), cmd_w, theme.ascii);
    let mut spans = vec![Span::raw(head), Span::raw(format!("{cmd:<cmd_w$}"))];
    spans.extend(ended.map(|t| Span::styled(t, theme.dim())));
    spans.extend([
        Span::raw(" "),
        Span::styled(map, mapping_style(&pg.mapping, theme)),
        Span::styled(used, used_style(p, theme)),
    ]);
    if w >= 50 {
        spans.push(Span::styled(peak, theme.peak()));
    }
    Line::from(spans)
}

/// One process row as every list draws it: the row, the mark of its worst active alert in
/// the first column, the selection highlight, and a click target. The overview's cards call
/// this (with `gpu` the card's position in `State::gpus`), so the selection is visible there too.
pub fn render_row(
    app: &App,
    gpu: usize,
    p: &ProcState,
    pg: &ProcGpu,
    row: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    let now = app.view_state().now;
    let growth = (app.sort.key == SortKey::Growth)
        .then(|| crate::tui::selection::growth(app.view_state(), p.info.pid, pg.gpu));
    proc_line_at(p, pg, row.width, theme, now, growth).render(row, buf);
    if let Some((mark, style)) = super::alerts::row_mark(app, p.info.pid, pg.gpu, theme) {
        buf.set_stringn(row.x, row.y, mark, usize::from(row.width), style);
    }
    if app.is_selected(Some(gpu), p.info.pid) {
        buf.set_style(row, theme.selected());
    }
    app.hit(
        row,
        Target::Proc {
            gpu,
            pid: p.info.pid,
        },
    );
}

/// The allocator panel's place when the selected process has no companion (the place is
/// kept so the table does not jump): what is known from outside, and how to see inside.
pub fn render_no_companion(
    p: &ProcState,
    pg: &ProcGpu,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let text = match p.exit {
        Some(e) => format!(
            "PID {} {} at {} and had no companion: only NVML's view of it is known (peak {}). \
             Start the next run with `gpumon run -- CMD` to keep its allocator's state and OOMs. {}",
            p.info.pid,
            e.cause.label(),
            theme.clock(e.at),
            human(pg.peak.value),
            mapping_note(p, pg)
        ),
        None => format!(
            "PID {} has no companion: NVML sees its {} but not its allocator. Start it with \
             `gpumon run -- CMD` (or `import gpumon; gpumon.start()`) for allocator detail. {}",
            p.info.pid,
            pg.last_used.map_or_else(|| "memory".into(), human),
            mapping_note(p, pg)
        ),
    };
    ratatui::widgets::Paragraph::new(text)
        .style(theme.dim())
        .wrap(ratatui::widgets::Wrap { trim: true })
        .render(area, buf);
}

/// A companion's line in the no-NVML list: highlighted when selected, clickable.
pub fn mark_companion(app: &App, pid: u32, row: Rect, buf: &mut Buffer, theme: &Theme) {
    if app.is_selected(None, pid) {
        buf.set_style(row, theme.selected());
    }
    app.hit(row, Target::Proc { gpu: 0, pid });
}

/// First row a list of `n` rows shows in `fit` lines so that the selection (on the GPU at
/// position `gpu`) stays on screen, with a line left below it for `+N more`. `lines(i)` is
/// how many lines row `i` takes (a process with a companion line takes two).
pub fn first_visible(
    app: &App,
    gpu: usize,
    n: usize,
    fit: u16,
    lines: impl Fn(usize) -> u16,
) -> usize {
    let sel = app.proc_row;
    if gpu != app.gpu || sel >= n {
        return 0;
    }
    let need = |first: usize| (first..=sel).map(&lines).sum::<u16>() + u16::from(sel + 1 < n);
    (0..=sel).find(|&f| need(f) <= fit).unwrap_or(sel)
}

/// Column titles over process rows of the same `width`, with the same column arithmetic
/// as `proc_line_at` so each title sits over its numbers. The sorted column carries ▼/▲;
/// the command column also says what an active filter shows and, with `more`, how many
/// processes did not fit, above and below the rows shown (the overview puts that here
/// when it has no row to spare): in full when there is room, as `+N` otherwise, never cut.
pub fn proc_header(app: &App, width: u16, ascii: bool, more: Option<(usize, usize)>) -> String {
    let w = usize::from(width);
    let sorted = |col: &str| {
        if app.sort.key.column() == col {
            app.sort.label(ascii)
        } else {
            col.to_string()
        }
    };
    let last = if app.sort.key == SortKey::Growth {
        sorted("GROWTH")
    } else {
        sorted("PEAK")
    };
    let (head, tail) = if w < 50 {
        (
            format!("{:>7} ", sorted("PID")),
            format!(" {:<8}{:>9}", "CUDA", sorted("USED")),
        )
    } else {
        (
            format!("{:>7} USER     ", sorted("PID")),
            format!(" {:<8}{:>9}{:>13}", "CUDA", sorted("USED"), last),
        )
    };
    let cmd_w = w.saturating_sub(head.chars().count() + tail.chars().count() + 1);
    let mut cmd = sorted("COMMAND");
    if !app.filter.is_empty() {
        cmd.push_str(&format!(" /{}", app.filter));
    }
    if let Some((above, below)) = more {
        let len = cmd.chars().count();
        let n = above + below;
        let ends = match (above, below) {
            (0, b) => format!("+{b} more"),
            (a, 0) => format!("+{a} above"),
            (a, b) => format!("+{a} above, +{b} below"),
        };
        let note = [
            format!("  ({ends}: Enter)"),
            format!(" {}", ends.replace(',', "")),
            format!(" +{n}"),
        ]
        .into_iter()
        .find(|t| len + t.chars().count() <= cmd_w);
        cmd.push_str(&note.unwrap_or_default());
    }
    let cmd: String = cmd.chars().take(cmd_w).collect();
    format!("{head}{cmd:<cmd_w$} {tail}")
}

/// The title row of a process list (see `proc_header`).
pub fn render_header(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let head = proc_header(app, area.width, theme.ascii, None);
    hit_header(app, area.x, area.y, area.width, &head, theme.ascii);
    buf.set_stringn(area.x, area.y, head, usize::from(area.width), theme.title());
}

/// Registers each sortable title in `head` (a `proc_header` drawn at `x`, `y`) as a click
/// target. PID and COMMAND come before the filter text, the amounts after it, so a filter
/// that happens to spell a title is never taken for one.
pub fn hit_header(app: &App, x: u16, y: u16, width: u16, head: &str, ascii: bool) {
    let keys = [
        SortKey::Pid,
        SortKey::Name,
        SortKey::Used,
        SortKey::Peak,
        SortKey::Growth,
    ];
    for key in keys {
        let title = if app.sort.key == key {
            app.sort.label(ascii)
        } else {
            key.column().to_string()
        };
        let at = match key {
            SortKey::Pid | SortKey::Name => head.find(&title),
            _ => head.rfind(&title),
        };
        let Some(at) = at else { continue };
        let col = head[..at].chars().count() as u16;
        if col >= width {
            continue;
        }
        let w = (title.chars().count() as u16).min(width - col);
        app.hit(
            Rect::new(x + col, y, w, 1),
            crate::tui::app::Target::SortBy(key),
        );
    }
}

/// Process table of one GPU with a header row and the selected row highlighted. The last
/// row says how many are below instead of being written over.
pub fn render_table(
    app: &App,
    rows: &[(&ProcState, &ProcGpu)],
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    if area.height == 0 {
        return;
    }
    render_header(app, area, buf, theme);
    let body = usize::from(area.height - 1);
    if rows.is_empty() {
        let msg = if app.filter.is_empty() {
            "no processes on this GPU".to_string()
        } else {
            format!("no process matches /{} (/ then Esc clears)", app.filter)
        };
        buf.set_stringn(
            area.x,
            area.y + 1,
            msg,
            usize::from(area.width),
            theme.dim(),
        );
        return;
    }
    // The selection may outlive the process it pointed at: show the last row selected instead.
    let selected = app.proc_row.min(rows.len() - 1);
    // Rows hidden above or below get a line of their own rather than covering a process.
    let win = super::scroll::window(rows.len(), selected, body);
    let top = area.y + 1 + u16::from(win.line_above);
    for (i, (p, pg)) in rows.iter().enumerate().skip(win.first).take(win.shown) {
        let y = top + (i - win.first) as u16;
        let r = Rect {
            x: area.x,
            y,
            width: area.width,
            height: 1,
        };
        render_row(app, app.gpu, p, pg, r, buf, theme);
        if i == selected && !app.is_selected(Some(app.gpu), p.info.pid) {
            buf.set_style(r, theme.selected());
        }
    }
    let line = |y: u16| Rect::new(area.x, y, area.width, 1);
    let (above, below) = super::scroll::texts(&win);
    if let Some(t) = above {
        super::scroll::indicator(line(area.y + 1), &t, buf, theme);
    }
    if let Some(t) = below {
        let y = top + win.shown as u16;
        super::scroll::indicator(line(y), &t, buf, theme);
    }
}

/// The one-line explanation of a mapping for the detail pane.
pub fn mapping_note(p: &ProcState, pg: &ProcGpu) -> String {
    let cvd = p.info.cuda_visible_devices.as_deref();
    match &pg.mapping {
        Mapping::Unknown => "environment not readable (other user?): logical index unknown".into(),
        Mapping::Hidden => format!(
            "this GPU is not in the process's CUDA_VISIBLE_DEVICES={:?}, yet it uses it",
            cvd.unwrap_or("")
        ),
        Mapping::Logical {
            index, uncertain, ..
        } => {
            // /proc shows the launch environment: a script that sets the variable itself
            // before CUDA starts is only seen right through its companion.
            let base = match cvd {
                Some(v) => {
                    format!("CUDA_VISIBLE_DEVICES={v} at launch -> this card is cuda:{index}")
                }
                None => {
                    format!("CUDA_VISIBLE_DEVICES unset at launch -> this card is cuda:{index}")
                }
            };
            match uncertain {
                Some(why) => format!("{base} (uncertain: {why})"),
                None => base,
            }
        }
    }
}
