//! A distributed job's row in a process list: its name, how many of its ranks are seen of
//! `WORLD_SIZE`, its GPUs, how its ranks' memory spreads (min / median / max) and which rank
//! ended first and how. Folded (`▸`) it stands for its ranks; unfolded (`▾`) it heads them.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::theme::Theme;
use crate::fmt::human;
use crate::model::exit::ExitCause;
use crate::model::job::Job;
use crate::model::job_status::JobStatus;

fn gpus(list: &[u32]) -> String {
    match list {
        [] => String::new(),
        [g] => format!("GPU {g}"),
        [a, .., b] if list.len() > 4 && usize::try_from(b - a).ok() == Some(list.len() - 1) => {
            format!("GPUs {a}-{b}")
        }
        _ => format!(
            "GPUs {}",
            list.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// `rank 3 OOM at epoch 57; 7 of 8 ended`, with the style it is drawn in.
fn ended(st: &JobStatus, theme: &Theme) -> Option<(String, Style)> {
    let e = st.first_end?;
    let who = e
        .rank
        .map_or_else(|| format!("PID {}", e.pid), |r| format!("rank {r}"));
    let mut s = format!("{who} {}", e.cause.label());
    if let Some(ep) = e.epoch.filter(|_| e.cause != ExitCause::Exited) {
        s.push_str(&format!(" at epoch {ep}"));
    }
    if st.ended > 1 || st.found > 1 {
        s.push_str(&format!("; {} of {} ended", st.ended, st.found));
    }
    let style = match e.cause {
        ExitCause::Oom => theme.error(),
        ExitCause::Killed => theme.warn(),
        ExitCause::Exited => theme.dim(),
    };
    Some((s, style))
}

/// The job's row, `width` cells wide: the most it can say in that width.
pub(crate) fn job_line(
    job: &Job,
    st: &JobStatus,
    folded: bool,
    width: u16,
    theme: &Theme,
) -> Line<'static> {
    let glyph = match (folded, theme.ascii) {
        (true, false) => "▸",
        (false, false) => "▾",
        (true, true) => ">",
        (false, true) => "v",
    };
    let ranks = match st.world_size {
        Some(w) => format!("{} of {w} ranks", st.found),
        None => format!("{} ranks", st.found),
    };
    let full = st.spread.map(|s| {
        format!(
            "min {} · median {} · max {}",
            human(s.min),
            human(s.median),
            human(s.max)
        )
    });
    let short = st.spread.map(|s| format!("max {}", human(s.max)));
    let end = ended(st, theme);
    // The first two cells are the alert mark's, as on a process row.
    let head = format!("  {glyph} {}  {ranks}", job.id);
    let where_ = gpus(&st.gpus);
    let plans: [&[Option<&String>]; 5] = [
        &[Some(&where_), full.as_ref()],
        &[full.as_ref()],
        &[short.as_ref()],
        &[],
        &[],
    ];
    let w = usize::from(width);
    for (i, extra) in plans.iter().enumerate() {
        let mut spans = vec![Span::styled(head.clone(), theme.title())];
        for e in extra.iter().flatten().filter(|e| !e.is_empty()) {
            spans.push(Span::raw(format!("  {e}")));
        }
        // The last plan leaves out how it ended; every other says it.
        if let Some((text, style)) = end.as_ref().filter(|_| i < plans.len() - 1) {
            spans.push(Span::styled(format!("  {text}"), *style));
        }
        let len: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        if len <= w || i == plans.len() - 1 {
            let line: String = spans.iter().map(|s| s.content.as_ref()).collect();
            if len > w {
                return Line::from(Span::styled(
                    narrow_head(glyph, &job.id, &ranks, w, theme),
                    theme.title(),
                ));
            }
            spans.push(Span::raw(" ".repeat(w - len)));
            return Line::from(spans);
        }
    }
    Line::default()
}

/// The head in `w` cells when even it does not fit: the rank count stays whole and the
/// job's name is shortened as a command is (`job.py@127.0…29521`); only where that leaves
/// the name under six cells is the whole head cut.
fn narrow_head(glyph: &str, id: &str, ranks: &str, w: usize, theme: &Theme) -> String {
    let fixed = 4 + 2 + ranks.chars().count();
    if w >= fixed + 6 {
        let id = super::text::fit_command(id, w - fixed, theme.ascii);
        let head = format!("  {glyph} {id}  {ranks}");
        let pad = w.saturating_sub(head.chars().count());
        return format!("{head}{}", " ".repeat(pad));
    }
    format!("  {glyph} {id}  {ranks}").chars().take(w).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{JobKey, Member, Spread};
    use crate::model::job_status::Ended;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn a_job_row_says_ranks_gpus_spread_and_who_ended_in_the_width_it_has() {
        let job = Job {
            key: JobKey::Master("127.0.0.1:29500".into()),
            id: "train.py@127.0.0.1:29500".into(),
            name: "train.py".into(),
            world_size: Some(8),
            members: (0..8)
                .map(|r| Member {
                    pid: 100 + r,
                    rank: Some(r),
                })
                .collect(),
        };
        let m = 1 << 20;
        let st = JobStatus {
            found: 8,
            world_size: Some(8),
            gpus: (0..8).collect(),
            spread: Some(Spread {
                min: 380 * m,
                median: 400 * m,
                max: 900 * m,
            }),
            ended: 7,
            first_end: Some(Ended {
                pid: 103,
                rank: Some(3),
                cause: ExitCause::Oom,
                epoch: Some(57),
            }),
        };
        let theme = Theme::default();
        let wide = text(&job_line(&job, &st, true, 160, &theme));
        assert!(
            wide.starts_with("  ▸ train.py@127.0.0.1:29500  8 of 8 ranks  GPUs 0-7  min 380 MiB · median 400 MiB · max 900 MiB  rank 3 OOM at epoch 57; 7 of 8 ended"),
            "{wide}"
        );
        assert_eq!(wide.chars().count(), 160);
        for w in [40u16, 60, 80, 120] {
            let t = text(&job_line(&job, &st, false, w, &theme));
            assert_eq!(t.chars().count(), usize::from(w), "{w}: {t}");
            assert!(t.starts_with("  ▾ train.py@"), "{w}: {t}");
        }
        // At 40x12 (a 38-cell row) the name gives way and the rank count stays whole.
        let tiny = text(&job_line(&job, &st, true, 30, &theme));
        assert_eq!(tiny.chars().count(), 30, "{tiny}");
        assert!(tiny.ends_with("  8 of 8 ranks"), "{tiny}");
        assert!(tiny.starts_with("  ▸ train.py@"), "{tiny}");
        let narrow = text(&job_line(&job, &st, true, 80, &theme));
        assert!(narrow.contains("rank 3 OOM at epoch 57"), "{narrow}");
    }
}
