//! The line under a process with a companion: allocator split, fragmentation, epoch, and
//! how old its reading is. Every number is of one moment, so they add up: the newest block
//! map with the sample of its phase point; with a block map but no such sample, F's part is
//! left out rather than set beside numbers of another moment. A row too narrow for all of
//! it gives up, in order, what the numbers need least (`Cut`), so that what was asked, L,
//! and the reading's age are the last words standing (at an OOM at 80 and 40 columns too).

use ratatui::text::{Line, Span};

use super::theme::Theme;
use crate::fmt::human;
use crate::model::alerts::Severity;
use crate::model::allocator::{DevAlloc, FragState, ProcAlloc};
use crate::model::time::Ts;

/// What an allocator line leaves out to fit its row, each step keeping the ones before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cut {
    Nothing,
    /// The framework's version (the detail names it).
    Version,
    /// The stranded bytes (T − L): L and T say whether the next request fits.
    Stranded,
    /// The epoch; the age in its short form (`(4m ago)`, `(OOM, 4m ago)`).
    Epoch,
    /// F: L and T are what the next request meets.
    Index,
    /// The framework's name, and `of T`.
    Total,
    /// `OOM 512 MiB:` for `OOM asked 512 MiB:`.
    Terse,
}

const CUTS: [Cut; 7] = [
    Cut::Nothing,
    Cut::Version,
    Cut::Stranded,
    Cut::Epoch,
    Cut::Index,
    Cut::Total,
    Cut::Terse,
];

/// The line as much of it as `width` cells hold; past the last cut, cut between words.
pub(crate) fn fitted(
    pa: &ProcAlloc,
    d: &DevAlloc,
    risk: Option<Severity>,
    grab: Option<&super::policy::Grab<'_>>,
    now: Ts,
    theme: &Theme,
    width: usize,
) -> Line<'static> {
    let mut line = Line::default();
    for cut in CUTS {
        line = summary(pa, d, risk, grab, now, theme, cut);
        if line.width() <= width {
            return line;
        }
    }
    super::text::fit_words(line, width, theme.ascii)
}

/// ` (12s ago)`, ` (at the OOM)`, ` (at the OOM, 12s ago)`, or nothing for a current
/// reading; cut short, ` (OOM, 12s ago)`, and without `OOM` where the line already begins
/// with it (`said_oom`).
fn age(f: &FragState, now: Ts, at_oom: bool, said_oom: bool, cut: Cut) -> String {
    if cut < Cut::Epoch {
        return super::allocator::age_words(f.t, now, at_oom);
    }
    let old = now - f.t >= super::allocator::OLD_READING_MS;
    let ago = format!("{} ago", crate::fmt::duration(now - f.t));
    match (at_oom && !said_oom, old) {
        (true, true) => format!(" (OOM, {ago})"),
        (true, false) => " (OOM)".into(),
        (false, true) => format!(" ({ago})"),
        (false, false) => String::new(),
    }
}

/// `F 0.998 stranded 8.77 GiB  L 1.00 GiB of T 9.77 GiB`, less what `cut` leaves out;
/// `F n/a — reason` whole.
fn frag(fr: &FragState, risk: Option<Severity>, theme: &Theme, cut: Cut) -> Vec<Span<'static>> {
    let (Some(f), Some(stranded)) = (fr.index(), fr.stranded()) else {
        return super::allocator::frag_text(Some(fr), risk, theme).spans;
    };
    let style = super::allocator::risk_style(risk, theme);
    let mut spans = Vec::new();
    if cut < Cut::Index {
        spans.push(Span::raw("F "));
        spans.push(Span::styled(format!("{f:.3}"), style));
        if !theme.color && risk.is_some() {
            spans.push(Span::raw(" (risk)"));
        }
    }
    if cut < Cut::Stranded {
        spans.push(Span::raw(" stranded "));
        spans.push(Span::styled(human(stranded), style));
    }
    if let (Some(l), Some(t)) = (fr.largest_free, fr.free_total) {
        let gap = if spans.is_empty() { "" } else { "  " };
        let text = if cut < Cut::Total {
            format!("{gap}L {} of T {}", human(l), human(t))
        } else {
            format!("{gap}L {}", human(l))
        };
        // Without F beside it, L carries the risk's colour.
        let st = if cut < Cut::Index { theme.dim() } else { style };
        spans.push(Span::styled(text, st));
    }
    spans
}

/// The line with `cut` left out.
fn summary(
    pa: &ProcAlloc,
    d: &DevAlloc,
    risk: Option<Severity>,
    grab: Option<&super::policy::Grab<'_>>,
    now: Ts,
    theme: &Theme,
    cut: Cut,
) -> Line<'static> {
    let arrow = if theme.ascii { "  `-" } else { "  ↳" };
    let label = super::policy::framework_label(pa);
    let head = match cut {
        Cut::Nothing => format!("{arrow} {label} "),
        c if c < Cut::Total => {
            format!("{arrow} {} ", label.split(' ').next().unwrap_or_default())
        }
        _ => format!("{arrow} "),
    };
    let mut spans = vec![Span::styled(head, theme.dim())];
    // At an OOM newer than the last block map, the failing moment's free blocks.
    let fr = d.frag_now();
    let at_oom = fr.as_deref().is_some_and(|f| d.at_oom(f));
    let moment = fr.as_deref().and_then(|f| Some((f, f.moment?)));
    match moment {
        Some((f, (alloc, reserved))) => {
            spans.push(Span::styled(
                format!("alloc {}", human(alloc)),
                theme.used(),
            ));
            // An idle pool in place of `cached`: what it holds beside what it uses.
            match super::policy::idle_pool(pa.hello.as_ref(), alloc, reserved, grab) {
                Some(pool) => {
                    spans.push(Span::raw(" · "));
                    spans.push(Span::styled(pool.short(), theme.warn()));
                    spans.push(Span::raw(" · "));
                }
                None => {
                    let cached = reserved.saturating_sub(alloc);
                    spans.push(Span::raw(format!(" cached {} ", human(cached))));
                }
            }
            spans.extend(frag(f, risk, theme, cut));
            let age = age(f, now, at_oom, false, cut);
            if !age.is_empty() {
                spans.push(Span::styled(age, theme.dim()));
            }
        }
        // The failing moment: what was asked against the cache's holes, no sample of
        // another moment beside them.
        None if at_oom => {
            let asked = d
                .ooms()
                .last()
                .and_then(|e| e.requested)
                .map_or_else(String::new, |r| match cut {
                    Cut::Terse => format!(" {}", human(r)),
                    _ => format!(" asked {}", human(r)),
                });
            spans.push(Span::styled(format!("OOM{asked}: "), theme.error()));
            match fr.as_deref() {
                Some(f) => {
                    spans.extend(frag(f, risk, theme, cut));
                    spans.push(Span::styled(age(f, now, true, true, cut), theme.dim()));
                }
                None => spans.extend(super::allocator::frag_text(None, risk, theme).spans),
            }
        }
        None => {
            let opt = |v: Option<u64>| v.map_or_else(|| "n/a".into(), human);
            spans.push(Span::styled(
                format!("alloc {}", opt(d.allocated_now())),
                theme.used(),
            ));
            let pool = match (d.allocated_now(), d.cached_now()) {
                (Some(a), Some(c)) => super::policy::idle_pool(pa.hello.as_ref(), a, a + c, grab),
                _ => None,
            };
            match pool {
                Some(pool) => {
                    spans.push(Span::raw(" · "));
                    spans.push(Span::styled(pool.short(), theme.warn()));
                }
                None => spans.push(Span::raw(format!(" cached {}", opt(d.cached_now())))),
            }
            if fr.as_deref().is_none_or(|f| f.index().is_none()) {
                spans.push(Span::raw(" "));
                spans.extend(super::allocator::frag_text(fr.as_deref(), risk, theme).spans);
            }
        }
    }
    if let Some(e) = d.epochs.back().filter(|_| cut < Cut::Epoch) {
        spans.push(Span::styled(format!("  epoch {}", e.epoch), theme.dim()));
    }
    Line::from(spans)
}
