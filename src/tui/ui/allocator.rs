//! Allocator panel of one process on one GPU: the stacked bar (NVML used =
//! allocated + held-but-free + outside the allocator), the free-block
//! histogram, the fragmentation index with stranded bytes, the policy in
//! words, OOM events and link counters. Pure: reads the model, draws into a buffer.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::theme::Theme;
use crate::fmt::human;
use crate::model::alerts::Severity;
use crate::model::allocator::{DevAlloc, FragState, ProcAlloc};
use crate::model::time::Ts;

/// Everything the panel shows for one (process, GPU).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AllocView<'a> {
    /// NVML's per-process used bytes now and its peak (None: not reported).
    pub nvml_used: Option<u64>,
    pub nvml_peak: Option<u64>,
    pub proc: &'a ProcAlloc,
    /// The device of that process on this GPU; None when it could not be matched.
    pub dev: Option<&'a DevAlloc>,
    /// Set when the process has ended: the panel is its last reported state.
    pub exit: Option<crate::model::exit::Exit>,
    /// Its most severe active fragmentation alert: the colour of F and stranded.
    pub risk: Option<Severity>,
    /// The grab-all rule's view of it, for the words beside an idle pool.
    pub grab: Option<super::policy::Grab<'a>>,
    /// The current sample's time: a reading older than this says its age.
    pub now: Ts,
}

/// A reading this old or older says its age beside its numbers.
pub(crate) const OLD_READING_MS: i64 = 5_000;

/// ` (12 s ago)`, ` (at the OOM)`, ` (at the OOM, 12 s ago)`, or nothing for a current one.
pub(crate) fn age_words(t: Ts, now: Ts, at_oom: bool) -> String {
    let ago = (now - t >= OLD_READING_MS).then(|| format!("{} ago", crate::fmt::duration(now - t)));
    match (at_oom, ago) {
        (true, Some(a)) => format!(" (at the OOM, {a})"),
        (true, None) => " (at the OOM)".into(),
        (false, Some(a)) => format!(" ({a})"),
        (false, None) => String::new(),
    }
}

/// Colour of F: green < 0.4, yellow to 0.7, red above. Without colour the
/// label carries the band instead (see `frag_text`).
pub(crate) fn frag_style(f: f64, theme: &Theme) -> Style {
    match f {
        f if f > 0.7 => theme.error(),
        f if f >= 0.4 => theme.warn(),
        _ => theme.used(),
    }
}

/// Colour of F and stranded on the allocator lines: the fragmentation risk of the process
/// as the alert rules judge it, not F alone. F is high by construction at an epoch end with
/// a large cache and says little; whether the program's recurring requests still fit does.
pub(crate) fn risk_style(risk: Option<Severity>, theme: &Theme) -> Style {
    match risk {
        Some(Severity::Critical) => theme.error(),
        Some(_) => theme.warn(),
        None => theme.normal(),
    }
}

/// `F 0.998 stranded 8.77 GiB` or `F n/a — reason`, coloured by `risk` (the process's
/// active fragmentation alert); without colour the risk is said in words.
pub(crate) fn frag_text(
    fr: Option<&FragState>,
    risk: Option<Severity>,
    theme: &Theme,
) -> Line<'static> {
    let Some(fr) = fr else {
        return Line::from(Span::styled("F n/a — no free-block data yet", theme.dim()));
    };
    match (fr.index(), fr.stranded()) {
        (Some(f), Some(stranded)) => {
            let style = risk_style(risk, theme);
            let mut spans = vec![Span::raw("F "), Span::styled(format!("{f:.3}"), style)];
            if !theme.color && risk.is_some() {
                spans.push(Span::raw(" (risk)"));
            }
            spans.push(Span::raw(" stranded "));
            spans.push(Span::styled(human(stranded), style));
            if let (Some(l), Some(t)) = (fr.largest_free, fr.free_total) {
                spans.push(Span::styled(
                    format!("  L {} of T {}", human(l), human(t)),
                    theme.dim(),
                ));
            }
            Line::from(spans)
        }
        _ => {
            let why = fr
                .na
                .clone()
                .unwrap_or_else(|| "largest free block unknown".into());
            Line::from(Span::styled(format!("F n/a — {why}"), theme.dim()))
        }
    }
}

/// The three parts of NVML's used bytes, and the scale the bar is drawn to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split {
    pub allocated: u64,
    pub cached: u64,
    /// Context, libraries, other pools: NVML used − reserved. None without NVML.
    pub outside: Option<u64>,
}

pub(crate) fn split(nvml_used: Option<u64>, dev: &DevAlloc) -> Option<Split> {
    let allocated = dev.allocated_now()?;
    let reserved = dev.reserved_now().unwrap_or(allocated).max(allocated);
    Some(Split {
        allocated,
        cached: reserved - allocated,
        outside: nvml_used.map(|u| u.saturating_sub(reserved)),
    })
}

/// The stacked bar over `width` cells, scaled to `scale` bytes, with a peak tick.
pub(crate) fn stacked_bar(
    s: Split,
    scale: u64,
    peak: Option<u64>,
    width: u16,
    theme: &Theme,
) -> Line<'static> {
    let w = usize::from(width);
    if w == 0 {
        return Line::default();
    }
    let scale = scale.max(1) as f64;
    let cells = |b: u64| ((b as f64 / scale) * w as f64).round() as usize;
    let a = cells(s.allocated).min(w);
    let c = cells(s.allocated + s.cached).min(w).saturating_sub(a);
    let o = cells(s.allocated + s.cached + s.outside.unwrap_or(0))
        .min(w)
        .saturating_sub(a + c);
    let (ga, gc, go, ge) = if theme.ascii {
        ('#', '+', '=', '.')
    } else {
        ('█', '▓', '▒', '░')
    };
    let mut rest: Vec<char> = std::iter::repeat_n(ge, w - a - c - o).collect();
    // The peak tick sits in the empty part; when the bar reaches it, it's the bar's end.
    if let Some(p) = peak {
        let at = cells(p).min(w).saturating_sub(1);
        if at >= a + c + o {
            rest[at - (a + c + o)] = '|';
        }
    }
    Line::from(vec![
        Span::styled(String::from_iter(std::iter::repeat_n(ga, a)), theme.used()),
        Span::styled(String::from_iter(std::iter::repeat_n(gc, c)), theme.peak()),
        Span::styled(String::from_iter(std::iter::repeat_n(go, o)), theme.dim()),
        Span::styled(String::from_iter(rest), theme.dim()),
    ])
}

fn legend(s: Split, width: u16, theme: &Theme) -> Line<'static> {
    let (ga, gc, go) = if theme.ascii {
        ("#", "+", "=")
    } else {
        ("█", "▓", "▒")
    };
    let outside = s.outside.map_or_else(|| "n/a".into(), human);
    let wide = width >= 60;
    let (la, lc, lo) = if wide {
        ("allocated", "cached free", "outside allocator")
    } else {
        ("alloc", "cache", "other")
    };
    Line::from(vec![
        Span::styled(format!("{ga}{la} {} ", human(s.allocated)), theme.used()),
        Span::styled(format!("{gc}{lc} {} ", human(s.cached)), theme.peak()),
        Span::styled(format!("{go}{lo} {outside}"), theme.dim()),
    ])
}

fn peaks_line(v: &AllocView<'_>, d: &DevAlloc, theme: &Theme) -> Line<'static> {
    let opt = |x: Option<u64>| x.map_or_else(|| "n/a".into(), human);
    Line::from(vec![
        Span::styled("peak ", theme.peak()),
        Span::raw(format!(
            "used {} alloc {} resv {}",
            opt(v.nvml_peak),
            opt(d.peak_allocated()),
            opt(d.peak_reserved())
        )),
    ])
}

/// Free-block histogram rows, largest buckets first, bars proportional to bytes.
pub(crate) fn histogram_lines(
    fr: &FragState,
    width: u16,
    max_rows: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let Some(hist) = fr.hist.as_ref() else {
        let why = fr
            .na
            .clone()
            .unwrap_or_else(|| "the allocator gives no free-block list".into());
        return vec![Line::from(Span::styled(
            format!("free blocks n/a — {why}"),
            theme.dim(),
        ))];
    };
    if hist.is_empty() {
        return vec![Line::from(Span::styled("no free blocks", theme.dim()))];
    }
    let max_bytes = hist.iter().map(|b| b.2).max().unwrap_or(1).max(1);
    let w = usize::from(width);
    // "≥16.0 MiB    500  8.79 GiB " then the bar.
    let label_w = 10 + 7 + 10;
    let bar_w = w.saturating_sub(label_w);
    let mut rows: Vec<&(u32, u64, u64)> = hist.iter().collect();
    rows.sort_by_key(|b| std::cmp::Reverse(b.0));
    let mut out = Vec::new();
    let shown = if rows.len() > max_rows {
        max_rows.saturating_sub(1)
    } else {
        rows.len()
    };
    for &&(k, count, bytes) in rows.iter().take(shown) {
        let size = human(1u64.checked_shl(k).unwrap_or(u64::MAX));
        let n = ((bytes as f64 / max_bytes as f64) * bar_w as f64).ceil() as usize;
        let bar: String = std::iter::repeat_n(theme.full(), n.min(bar_w)).collect();
        out.push(Line::from(vec![
            Span::raw(format!(
                "{:>9} {:>6} {:>9} ",
                format!("≥{size}"),
                count,
                human(bytes)
            )),
            Span::styled(bar, theme.peak()),
        ]));
    }
    if shown < rows.len() {
        let (n, b) = rows[shown..]
            .iter()
            .fold((0u64, 0u64), |(n, b), r| (n + r.1, b + r.2));
        out.push(Line::from(Span::styled(
            format!(
                "{:>9} {n:>6} {:>9} in {} smaller buckets",
                "",
                human(b),
                rows.len() - shown
            ),
            theme.dim(),
        )));
    }
    if theme.ascii {
        for l in &mut out {
            for s in &mut l.spans {
                s.content = s.content.replace('≥', ">").into();
            }
        }
    }
    out
}

pub(crate) fn oom_line(d: &DevAlloc, theme: &Theme) -> Option<Line<'static>> {
    let e = d.ooms().last()?;
    let opt = |x: Option<u64>| x.map_or_else(|| "?".into(), human);
    let n = d.ooms().count();
    let t = e.t.map(|t| theme.clock(t)).unwrap_or_default();
    Some(Line::from(Span::styled(
        format!(
            "{} OOM x{n} {t} asked {} (T {} L {})",
            theme.warn_sign(),
            opt(e.requested),
            opt(e.free_total),
            opt(e.largest_free)
        ),
        theme.error(),
    )))
}

fn link_line(p: &ProcAlloc, theme: &Theme) -> Option<Line<'static>> {
    let l = &p.link;
    let bad = l.rejected + l.oversize + l.unknown;
    if bad == 0 && l.dropped == 0 && p.companion_dropped == 0 {
        return None;
    }
    Some(Line::from(Span::styled(
        format!(
            "link: {bad} refused ({} oversize, {} unknown), dropped {} here / {} by companion",
            l.oversize, l.unknown, l.dropped, p.companion_dropped
        ),
        theme.warn(),
    )))
}

/// The whole panel. Lines are dropped from the bottom of the priority list
/// (histogram, link counters) when the area is short; nothing wraps.
pub(crate) fn render_process_alloc(area: Rect, buf: &mut Buffer, v: &AllocView<'_>, theme: &Theme) {
    let lines = panel_lines(v, area.width, area.height, theme);
    for (i, line) in lines.into_iter().take(usize::from(area.height)).enumerate() {
        let y = area.y + i as u16;
        // A line too long ends after its last whole value, with a mark saying so.
        let line = super::text::fit_words(line, usize::from(area.width), theme.ascii);
        buf.set_line(area.x, y, &line, area.width);
    }
}

/// `requests 640 MiB ×12 (1 hole fits)`: the recurring large requests beside F,
/// with how many free blocks of the same reading fit the largest.
fn requests_line(fr: Option<&FragState>, theme: &Theme) -> Option<Line<'static>> {
    let fr = fr?;
    let largest = fr.requests.iter().map(|r| r.0).max()?;
    let times = if theme.ascii { "x" } else { "×" };
    let list: Vec<String> = fr
        .requests
        .iter()
        .map(|(s, n)| format!("{} {times}{n}", human(*s)))
        .collect();
    let fits = fr.free_top.iter().filter(|&&h| h >= largest).count();
    let holes = if fits == 1 { "hole fits" } else { "holes fit" };
    Some(Line::from(Span::styled(
        format!(
            "requests {} ({fits} free {holes} the largest)",
            list.join(", ")
        ),
        theme.dim(),
    )))
}

/// The panel as lines (for callers composing their own layout, and tests).
pub(crate) fn panel_lines(
    v: &AllocView<'_>,
    width: u16,
    height: u16,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let p = v.proc;
    let label = super::policy::framework_label(p);
    let policy = super::policy::policy(p).unwrap_or_else(|| "allocator policy unknown".into());
    let mut out = if label.chars().count() + 1 + policy.chars().count() <= usize::from(width) {
        vec![Line::from(vec![
            Span::styled(format!("{label} "), theme.title()),
            Span::styled(policy, theme.normal()),
        ])]
    } else {
        // The policy is the answer to "why is memory held": wrapped, never cut.
        let text = format!("{label} {policy}");
        let lines = super::wrap::words(&text, usize::from(width));
        lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| match l.strip_prefix(label.as_str()) {
                Some(rest) if i == 0 => Line::from(vec![
                    Span::styled(label.clone(), theme.title()),
                    Span::styled(rest.to_string(), theme.normal()),
                ]),
                _ => Line::styled(l, theme.normal()),
            })
            .collect()
    };
    if let Some(e) = v.exit {
        let st = match e.cause {
            crate::model::exit::ExitCause::Oom => theme.error(),
            _ => theme.warn(),
        };
        out.push(Line::from(Span::styled(
            format!(
                "{} {}: its last reported state",
                e.cause.label(),
                theme.clock(e.at)
            ),
            st,
        )));
    }
    // An idle pool and the grab-all rule's word on it, under the policy that made it.
    if let Some(d) = v.dev
        && let (Some(a), Some(r)) = (d.allocated_now(), d.reserved_now())
        && let Some(note) = super::policy::idle_pool(p.hello.as_ref(), a, r, v.grab.as_ref())
    {
        out.push(Line::from(Span::styled(
            note.detail(usize::from(width)),
            theme.warn(),
        )));
    }
    let Some(d) = v.dev else {
        out.push(Line::from(Span::styled(
            "no allocator data for this GPU (device not matched yet)",
            theme.dim(),
        )));
        return out;
    };
    match split(v.nvml_used, d) {
        Some(s) => {
            let reserved = s.allocated + s.cached;
            let scale = [v.nvml_used, v.nvml_peak, d.peak_reserved(), Some(reserved)]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or(1);
            let peak = v.nvml_peak.or(d.peak_reserved());
            out.push(stacked_bar(s, scale, peak, width, theme));
            out.push(legend(s, width, theme));
            out.push(peaks_line(v, d, theme));
        }
        None => out.push(Line::from(Span::styled(
            "allocated n/a — the companion has not sampled this device yet",
            theme.dim(),
        ))),
    }
    if let Some(l) = d.limit() {
        out.push(Line::from(Span::styled(
            format!("limit {}", human(l)),
            theme.dim(),
        )));
    }
    // F with L and T, and the OOM with what was asked and free: wrapped between whole
    // values rather than cut before the decisive number.
    let w = usize::from(width);
    // The newest complete reading (the OOM's own at an OOM), with its age when old.
    let frag = d.frag_now();
    let mut line = frag_text(frag.as_deref(), v.risk, theme);
    if let Some(f) = frag.as_deref().filter(|f| f.index().is_some()) {
        let at_oom = d.at_oom(f);
        let age = age_words(f.t, v.now, at_oom);
        if !age.is_empty() {
            line.spans.push(Span::styled(age, theme.dim()));
        }
    }
    out.extend(super::text::wrap_pieces(line, w, theme.ascii));
    if let Some(l) = requests_line(d.frag.as_ref(), theme) {
        out.push(l);
    }
    if let Some(l) = oom_line(d, theme) {
        out.extend(super::text::wrap_pieces(l, w, theme.ascii));
    }
    let tail = link_line(p, theme);
    let room = usize::from(height)
        .saturating_sub(out.len() + usize::from(tail.is_some()))
        .min(16);
    if room > 0
        && let Some(fr) = d.frag.as_ref()
    {
        out.extend(histogram_lines(fr, width, room, theme));
    }
    out.extend(tail);
    if theme.ascii {
        for l in &mut out {
            for s in &mut l.spans {
                if !s.content.is_ascii() {
                    s.content = s.content.replace('—', "-").replace('≥', ">").into();
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::allocator::Companions;
    use crate::model::frame::CompanionFrame;
    use crate::wire::{Frag, FrameworkEvent, Hello, Message, Sample};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn companions() -> Companions {
        let mut c = Companions::default();
        let frames = [
            Message::Hello(Hello {
                role: "companion".into(),
                framework: Some("torch".into()),
                framework_version: Some("2.11".into()),
                allocator: Some("expandable_segments".into()),
                ..Hello::default()
            }),
            Message::Sample(Sample {
                dev: 0,
                allocated: Some(GIB),
                reserved: Some(10 * GIB),
                peak_allocated: Some(2 * GIB),
                peak_reserved: Some(10 * GIB),
                ..Sample::default()
            }),
            Message::Frag(Frag {
                dev: 0,
                free_total: Some(9 * GIB),
                largest_free: Some(18 * MIB),
                hist: Some(vec![(24, 500, 9 * GIB), (21, 3, 6 * MIB), (20, 1, MIB)]),
                ..Frag::default()
            }),
            Message::Event(FrameworkEvent {
                t: Some(1_000),
                kind: "oom".into(),
                dev: Some(0),
                requested: Some(64 * MIB),
                free_total: Some(9 * GIB),
                largest_free: Some(18 * MIB),
                ..FrameworkEvent::default()
            }),
        ];
        for m in frames {
            c.apply(&CompanionFrame {
                t: 1_000,
                pid: 9,
                msg: m,
            });
        }
        c
    }

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn view(c: &Companions) -> AllocView<'_> {
        let p = c.get(9).expect("pid 9");
        AllocView {
            nvml_used: Some(10 * GIB + 512 * MIB),
            exit: None,
            nvml_peak: Some(11 * GIB),
            proc: p,
            dev: p.devices.get(&0),
            risk: Some(Severity::Warning),
            grab: None,
            now: 0,
        }
    }

    #[test]
    fn split_adds_up_to_nvml_used() {
        let c = companions();
        let v = view(&c);
        let s = split(v.nvml_used, v.dev.expect("dev")).expect("sampled");
        assert_eq!(
            s.allocated + s.cached + s.outside.unwrap_or(0),
            10 * GIB + 512 * MIB
        );
        assert_eq!(s.outside, Some(512 * MIB));
        assert_eq!(
            split(None, v.dev.expect("dev")).map(|s| s.outside),
            Some(None)
        );
    }

    #[test]
    fn panel_content_unicode_and_colour() {
        let c = companions();
        let theme = Theme {
            ascii: false,
            color: true,
            utc: true,
        };
        let lines = text(&panel_lines(&view(&c), 80, 20, &theme));
        assert!(lines[0].contains("torch 2.11 PyTorch: expandable_segments"));
        assert_eq!(lines[1].chars().count(), 80, "bar fills the width");
        assert!(
            lines[2].contains("allocated 1.00 GiB")
                && lines[2].contains("outside allocator 512 MiB")
        );
        assert!(lines.iter().any(|l| l.starts_with("F 0.998 stranded")));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("OOM x1") && l.contains("asked 64.0 MiB"))
        );
        let first_bucket = lines
            .iter()
            .position(|l| l.contains("≥16.0 MiB"))
            .expect("bucket row");
        assert!(lines[first_bucket].contains("500"));
        assert!(
            lines[first_bucket + 1].contains("≥2.00 MiB"),
            "largest buckets first"
        );
    }

    #[test]
    fn narrow_ascii_no_colour() {
        let c = companions();
        let theme = Theme {
            ascii: true,
            color: false,
            utc: true,
        };
        // F and the OOM take two rows each at 40 columns (wrapped between values).
        let area = Rect::new(0, 0, 40, 11);
        let mut buf = Buffer::empty(area);
        render_process_alloc(area, &mut buf, &view(&c), &theme);
        let rows: Vec<String> = (0..area.height)
            .map(|y| {
                (0..area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect();
        for r in &rows {
            assert!(r.is_ascii(), "non-ASCII in ascii mode: {r:?}");
        }
        assert!(
            rows.iter().any(|r| r.contains("F 0.998 (risk)")),
            "{rows:#?}"
        );
        assert!(
            rows[1].starts_with("###"),
            "allocated part drawn first: {:?}",
            rows[1]
        );
        assert!(rows[1].contains('+'));
        // Short area: the histogram is cut to what fits, with a summary row.
        assert!(rows.iter().any(|r| r.contains(">16.0 MiB")));
    }

    #[test]
    fn unavailable_numbers_say_why() {
        let fr = FragState {
            na: Some("cudaMallocAsync keeps no block map".into()),
            ..FragState::default()
        };
        let theme = Theme::default();
        let l = text(&[frag_text(Some(&fr), None, &theme)]);
        assert_eq!(l[0], "F n/a — cudaMallocAsync keeps no block map");
        let h = text(&histogram_lines(&fr, 40, 5, &theme));
        assert_eq!(h[0], "free blocks n/a — cudaMallocAsync keeps no block map");
    }

    /// F and stranded take the colour of the process's fragmentation risk, not of F: a
    /// high F without a risk alert is not red (the clean runs of the third alert corpus).
    #[test]
    fn f_and_stranded_are_coloured_by_risk() {
        let fr = FragState {
            free_total: Some(8 * GIB),
            largest_free: Some(100 * MIB),
            ..FragState::default()
        };
        let t = Theme::default();
        let style_of = |risk| {
            let l = frag_text(Some(&fr), risk, &t);
            (l.spans[1].style, l.spans[3].style)
        };
        assert_eq!(style_of(None), (t.normal(), t.normal()));
        assert_eq!(style_of(Some(Severity::Warning)), (t.warn(), t.warn()));
        assert_eq!(style_of(Some(Severity::Critical)), (t.error(), t.error()));
    }

    #[test]
    fn recurring_requests_sit_beside_f() {
        let fr = FragState {
            requests: vec![(640 * MIB, 12), (8 * MIB, 3)],
            free_top: vec![640 * MIB, 8 * MIB],
            ..FragState::default()
        };
        let l = text(&[requests_line(Some(&fr), &Theme::default()).expect("line")]);
        assert_eq!(
            l[0],
            "requests 640 MiB ×12, 8.00 MiB ×3 (1 free hole fits the largest)"
        );
        assert!(requests_line(Some(&FragState::default()), &Theme::default()).is_none());
    }

    #[test]
    fn f_colour_bands() {
        let t = Theme::default();
        assert_eq!(frag_style(0.39, &t), t.used());
        assert_eq!(frag_style(0.4, &t), t.warn());
        assert_eq!(frag_style(0.7, &t), t.warn());
        assert_eq!(frag_style(0.71, &t), t.error());
    }

    #[test]
    fn histogram_truncates_with_summary() {
        let fr = FragState {
            hist: Some((10..30).map(|k| (k, 1, 1u64 << k)).collect()),
            ..FragState::default()
        };
        let lines = text(&histogram_lines(&fr, 40, 4, &Theme::default()));
        assert_eq!(lines.len(), 4);
        assert!(lines[3].contains("in 17 smaller buckets"), "{lines:?}");
    }
}
