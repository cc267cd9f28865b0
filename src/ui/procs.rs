//! Process rows: pid, user, command, the process's own device index, used and peak.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::theme::Theme;
use crate::model::bytes::human;
use crate::model::mapping::Mapping;
use crate::model::state::{ProcGpu, ProcState};

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

fn used_label(pg: &ProcGpu) -> String {
    pg.last_used.map_or_else(|| "n/a".into(), human)
}

/// One process row for the overview cards, shortened to `width`.
pub fn proc_line(p: &ProcState, pg: &ProcGpu, width: u16, theme: &Theme) -> Line<'static> {
    let w = usize::from(width);
    let user = p.info.user.clone().unwrap_or_else(|| "?".into());
    let used = format!("{:>9}", used_label(pg));
    let peak = format!(" pk {:>9}", human(pg.peak.value));
    let map = format!(" {:<8}", pg.mapping.label());
    let head = if w < 50 {
        format!("{:>7} ", p.info.pid)
    } else {
        format!("{:>7} {:<8.8} ", p.info.pid, user)
    };
    let tail_w = used.len() + map.len() + if w >= 50 { peak.len() } else { 0 };
    let cmd_w = w.saturating_sub(head.len() + tail_w + 1);
    let cmd = super::text::fit_command(&command(p), cmd_w, theme.ascii);
    let mut spans = vec![
        Span::raw(head),
        Span::raw(format!("{cmd:<cmd_w$} ")),
        Span::styled(map, mapping_style(&pg.mapping, theme)),
        Span::styled(used, theme.used()),
    ];
    if w >= 50 {
        spans.push(Span::styled(peak, theme.peak()));
    }
    Line::from(spans)
}

/// Column titles over `proc_line` rows of the same `width` (same column arithmetic).
pub fn proc_header(width: u16) -> String {
    let w = usize::from(width);
    let (head, tail) = if w < 50 {
        ("    PID ", format!(" {:<8}{:>9}", "CUDA", "USED"))
    } else {
        (
            "    PID USER     ",
            format!(" {:<8}{:>9}{:>13}", "CUDA", "USED", "PEAK"),
        )
    };
    let cmd_w = w.saturating_sub(head.len() + tail.len() + 1);
    format!("{head}{:<cmd_w$} {tail}", "COMMAND")
}

/// Process table of one GPU with a header row and the selected row highlighted.
pub fn render_table(
    rows: &[(&ProcState, &ProcGpu)],
    selected: usize,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
) {
    if area.height == 0 {
        return;
    }
    // The same column arithmetic as the rows, so titles sit over their numbers.
    buf.set_stringn(
        area.x,
        area.y,
        proc_header(area.width),
        usize::from(area.width),
        theme.title(),
    );
    let mut body = usize::from(area.height - 1);
    if rows.is_empty() {
        buf.set_stringn(
            area.x,
            area.y + 1,
            "no processes on this GPU",
            usize::from(area.width),
            theme.dim(),
        );
        return;
    }
    // The selection may outlive the process it pointed at: show the last row selected instead.
    let selected = selected.min(rows.len() - 1);
    // The "+N below" indicator gets its own row rather than covering the last process.
    let indicator = rows.len() > body && body >= 2;
    if indicator {
        body -= 1;
    }
    let first = selected.saturating_sub(body.saturating_sub(1));
    for (i, (p, pg)) in rows.iter().enumerate().skip(first).take(body) {
        let y = area.y + 1 + (i - first) as u16;
        let r = Rect {
            x: area.x,
            y,
            width: area.width,
            height: 1,
        };
        proc_line(p, pg, area.width, theme).render(r, buf);
        if i == selected {
            buf.set_style(r, theme.selected());
        }
    }
    let hidden = rows.len().saturating_sub(first + body);
    if hidden > 0 && indicator {
        // A rule with the count at its end: reads as "the list goes on below".
        let t = format!(" +{hidden} below (j) ");
        let y = area.y + area.height - 1;
        let rule = usize::from(area.width).saturating_sub(t.len());
        buf.set_string(
            area.x,
            y,
            theme.hline().to_string().repeat(rule),
            theme.dim(),
        );
        buf.set_string(area.x + rule as u16, y, t, theme.warn());
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
