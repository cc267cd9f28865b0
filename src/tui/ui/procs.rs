//! Process lists: rows and their title row (laid out by `proc_column`), the selection,
//! click targets and scrolling, and the words for a process without a companion.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use super::proc_column::{self, RowCtx};
use super::theme::Theme;
use crate::fmt::human;
use crate::model::mapping::Mapping;
use crate::model::state::{ProcGpu, ProcState};
use crate::tui::app::{App, Target};

/// One process row for the overview cards, shortened to `width`.
pub fn proc_line(p: &ProcState, pg: &ProcGpu, width: u16, theme: &Theme) -> Line<'static> {
    let ctx = RowCtx {
        p,
        pg,
        now: pg.last_seen,
        state: None,
        theme,
    };
    proc_column::row(&ctx, width, None)
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
    let ctx = RowCtx {
        p,
        pg,
        now: app.view_state().now,
        state: Some(app.view_state()),
        theme,
    };
    // A folded job is drawn on its lead's row, selected and opened as its lead.
    let job = app.folded_job(pg.gpu, p.info.pid);
    let line = match &job {
        Some(job) => {
            let st = crate::model::job_status::status(app.view_state(), job);
            super::job_row::job_line(job, &st, true, row.width, theme)
        }
        None => proc_column::row(&ctx, row.width, Some(app.sort.key)),
    };
    super::put::line(&line, row, buf);
    let pids: Vec<u32> = match &job {
        Some(j) => j.members.iter().map(|m| m.pid).collect(),
        None => vec![p.info.pid],
    };
    if let Some((mark, style)) = super::alerts::rows_mark(app, &pids, pg.gpu, theme) {
        super::put::row(buf, row, row.y, mark, style);
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
    remote: Option<&str>,
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
            mapping_note(p, pg, remote)
        ),
        None => format!(
            "PID {} has no companion: NVML sees its {} but not its allocator. Start it with \
             `gpumon run -- CMD` (or `import gpumon; gpumon.start()`) for allocator detail. {}",
            p.info.pid,
            pg.last_used.map_or_else(|| "memory".into(), human),
            mapping_note(p, pg, remote)
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

/// Column titles over process rows of the same `width` (`proc_column` lays out both). The
/// sorted column carries ▼/▲; the command column also says what an active filter shows
/// and, with `more`, how many processes did not fit, above and below the rows shown (the
/// overview puts that here when it has no row to spare): in full when there is room, as
/// `+N` otherwise, never cut.
pub fn proc_header(app: &App, width: u16, ascii: bool, more: Option<(usize, usize)>) -> String {
    let note = |mut cmd: String, cmd_w: usize| {
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
        cmd
    };
    proc_column::header(width, Some(app.sort.key), |s| title(app, s, ascii), note)
}

/// A column's title as the header draws it: the sorted one with its direction.
fn title(app: &App, s: &proc_column::Spec, ascii: bool) -> String {
    if s.sort == Some(app.sort.key) {
        app.sort.label(ascii)
    } else {
        s.title.to_string()
    }
}

/// The title row of a process list (see `proc_header`).
pub fn render_header(app: &App, area: Rect, buf: &mut Buffer, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let head = proc_header(app, area.width, theme.ascii, None);
    hit_header(app, area.x, area.y, area.width, area.width, theme.ascii);
    super::put::row(buf, area, area.y, head, theme.title());
}

/// Registers each sortable title of a `proc_header` `table_w` wide, drawn at `x`, `y` in
/// `width` cells, as a click target.
pub fn hit_header(app: &App, x: u16, y: u16, width: u16, table_w: u16, ascii: bool) {
    let titles = proc_column::sort_titles(table_w, Some(app.sort.key), |s| title(app, s, ascii));
    for (key, col, len) in titles {
        if col >= width {
            continue;
        }
        let w = len.min(width - col);
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
        super::put::row(buf, area, area.y + 1, msg, theme.dim());
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

/// The one-line explanation of a mapping for the detail pane. `remote`: the node the
/// process runs on, when its facts come from that node's metrics, which do not carry its
/// environment.
pub fn mapping_note(p: &ProcState, pg: &ProcGpu, remote: Option<&str>) -> String {
    let cvd = p.info.cuda_visible_devices.as_deref();
    match &pg.mapping {
        Mapping::Unknown if remote.is_some() => {
            let node = remote.unwrap_or_default();
            format!(
                "read from Prometheus: which CUDA device this card is to it is on {node}                  (ssh {node} gpumon)"
            )
        }
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
