//! The page's memory charts: one per GPU (the card, and each process as NVML lists it) and
//! one per process and GPU (NVML, the companion's allocated and reserved, epoch floors and
//! peaks, and for every growth alert its fitted line and forecast, next to the OOM that
//! came or did not). Every chart shares the run's time axis, stretched only to reach a
//! forecast.

use crate::fmt::human;
use crate::model::alerts::AlertKind;
use crate::model::time::Ts;
use crate::report::alerts::{AlertLine, Change};
use crate::report::collect::{GpuRun, ProcRun, Run};
use crate::report::svg::Chart;

/// Series classes for the processes of a GPU chart (colours in the page's CSS).
pub const PALETTE: usize = 8;
/// A forecast may stretch a chart's time axis to at most this many times the run's length.
const MAX_STRETCH: f64 = 2.0;
const HEIGHT: f64 = 250.0;

/// A chart and its legend entries (CSS class, words).
pub struct Drawn {
    pub svg: String,
    pub legend: Vec<(String, String)>,
    /// Words under the chart: for every growth alert, what it forecast and what happened;
    /// and how many labels had no room.
    pub notes: Vec<String>,
}

/// The chart and its notes, with a word on the labels it had no room for.
fn drawn(
    c: Chart,
    id: &str,
    title: &str,
    legend: Vec<(String, String)>,
    mut notes: Vec<String>,
) -> Drawn {
    let n = c.unlabelled();
    if n > 0 {
        let s = if n == 1 { "" } else { "s" };
        notes.push(format!(
            "{n} line{s} on this chart had no room for a label: the alert table below names every alert."
        ));
    }
    Drawn {
        svg: c.finish(id, title),
        legend,
        notes,
    }
}

fn gap_ms(run: &Run) -> i64 {
    (run.header.interval_ms as i64 * 4).max(15_000)
}

pub fn gpu_chart(run: &Run, g: &GpuRun) -> Drawn {
    let procs: Vec<&ProcRun> = run
        .procs
        .iter()
        .filter(|p| p.gpu == Some(g.info.index) && !p.nvml.is_empty())
        .collect();
    // Scaled to the data, as the TUI's chart is until `f`: processes of a few GiB on a
    // 141 GiB card are otherwise flat lines at the bottom. The card's total is a marked
    // line when it falls inside the scale, else named at the top edge.
    let data_peak = procs
        .iter()
        .filter_map(|p| p.nvml.range().map(|r| r.1))
        .chain(g.used.range().map(|r| r.1))
        .fold(0.0, f64::max);
    let card = g.total as f64;
    let ymax = if card > 0.0 && data_peak > 0.0 && card > 1.6 * data_peak {
        data_peak
    } else {
        card.max(data_peak)
    };
    let mut c = Chart::new(run.start, run.end, ymax, HEIGHT);
    c.axes();
    let mut legend = vec![("used".to_string(), "used (NVML, whole card)".to_string())];
    if g.total > 0 {
        if card <= c.top() {
            c.hline(
                g.total,
                "ceiling",
                &format!("card total {}", human(g.total)),
                true,
            );
        } else {
            let top = c.top() as u64;
            c.hline(
                top,
                "ceiling",
                &format!(
                    "↑ card total {} (above this 0–{} scale)",
                    human(g.total),
                    human(top)
                ),
                true,
            );
        }
    }
    c.series(&g.used, "used", gap_ms(run));
    // Labels as the TUI's rows tell runs apart: the script and the arguments that differ
    // (a 60-character cut of `python3 /long/path/scenario.py --name …` named none).
    // A multiprocessing child by the program it runs, a rank with its rank.
    let names: Vec<&str> = procs.iter().map(|p| program(run, p)).collect();
    let labels = crate::model::label::distinct_labels(&names);
    for (i, (p, label)) in procs.iter().zip(labels).enumerate() {
        let class = format!("p{}", i % PALETTE);
        c.series(&p.nvml, &class, gap_ms(run));
        let rank = run
            .who
            .get(&p.pid)
            .map(|w| w.rank_prefix())
            .unwrap_or_default();
        legend.push((class, format!("PID {} {rank}{}", p.pid, short(&label))));
    }
    alert_marks(&mut c, run, |a| a.gpu == g.info.index, true);
    let title = format!("GPU {} memory used over time", g.info.index);
    drawn(c, &format!("gpu-{}", g.info.index), &title, legend, vec![])
}

/// Vertical lines where alerts were raised (OOMs labelled), for the alerts `keep` selects.
/// The command line a process is known by: a multiprocessing child's program, else its own.
pub fn program<'a>(run: &'a Run, p: &'a ProcRun) -> &'a str {
    match run.who.get(&p.pid) {
        Some(w) if w.mp_child => w.program.as_deref().unwrap_or(&p.name),
        _ => &p.name,
    }
}

/// What a job's chart draws of a rank: its allocator's allocated, else NVML's usage.
fn rank_series(p: &ProcRun) -> (&crate::report::minmax::MinMax, &'static str) {
    match p.dev.as_ref().filter(|d| !d.allocated.is_empty()) {
        Some(d) => (&d.allocated, "allocated"),
        None => (&p.nvml, "used (NVML)"),
    }
}

/// A distributed job: its ranks side by side on one chart (what the allocator handed out,
/// else NVML's usage), each rank's epoch floors, and the rank a divergent-rank alert named
/// marked where it was raised.
pub fn job_chart(run: &Run, job: &crate::model::job::Job, idx: usize) -> Drawn {
    let ranks: Vec<(&crate::model::job::Member, &ProcRun)> = job
        .members
        .iter()
        .flat_map(|m| {
            run.procs
                .iter()
                .filter(move |p| p.pid == m.pid)
                .map(move |p| (m, p))
        })
        .collect();
    let ymax = ranks
        .iter()
        .filter_map(|(_, p)| rank_series(p).0.range())
        .map(|r| r.1)
        .fold(0.0, f64::max);
    let mut c = Chart::new(run.start, run.end, ymax, HEIGHT);
    c.axes();
    let divergent: Vec<&AlertLine> = run
        .alerts
        .iter()
        .filter(|a| {
            a.kind == AlertKind::DivergentRank
                && a.change == Change::Raised
                && a.pid.is_some_and(|p| job.has(p))
        })
        .collect();
    let mut legend = vec![];
    for (i, (m, p)) in ranks.iter().enumerate() {
        let class = format!("p{}", i % PALETTE);
        let (s, what) = rank_series(p);
        c.series(s, &class, gap_ms(run));
        let rank = m
            .rank
            .map_or_else(|| "rank ?".into(), |r| format!("rank {r}"));
        let mut words = format!("{rank} · PID {} · {what}", p.pid);
        if let Some(a) = divergent.iter().find(|a| a.pid == Some(p.pid)) {
            let excess = a.evidence.points.last().map_or(0, |p| p.bytes);
            words += &format!(
                " · the divergent rank: {} more than its peers when named, +{}/epoch",
                human(excess),
                human(a.evidence.slope.unwrap_or(0.0).max(0.0) as u64)
            );
        }
        legend.push((class, words));
    }
    for a in &divergent {
        c.vline(
            a.at,
            "warnline",
            &format!("divergent rank · PID {}", a.pid.unwrap_or(0)),
        );
    }
    let title = format!("Job {}: its ranks side by side", job.id);
    drawn(c, &format!("job-{idx}"), &title, legend, vec![])
}

/// Raises this close (chart units) share one label per kind: a burst of OOMs at one
/// moment reads `fragmentation OOM · PIDs 776, 779, 780 +1`, not four labels stacked.
const MARK_NEAR: f64 = 40.0;

/// A line at every raised alert, and a label per kind and burst.
fn alert_marks(c: &mut Chart, run: &Run, keep: impl Fn(&AlertLine) -> bool, with_pid: bool) {
    // (first time, class, kind's words, PIDs)
    let mut groups: Vec<(Ts, &str, String, Vec<u32>)> = vec![];
    for a in run
        .alerts
        .iter()
        .filter(|a| a.change == Change::Raised && keep(a))
    {
        let class = if a.is_oom() { "oom" } else { "warnline" };
        c.vline_bare(a.at, class);
        let what = a.kind.label().to_string();
        let near = groups
            .iter_mut()
            .rev()
            .find(|g| g.2 == what && c.dx(g.0, a.at) < MARK_NEAR);
        match near {
            Some(g) => g.3.extend(a.pid.filter(|p| !g.3.contains(p))),
            None => groups.push((a.at, class, what, a.pid.into_iter().collect())),
        }
    }
    for (t, class, what, pids) in groups {
        let label = match (with_pid, pids.as_slice()) {
            (true, [p]) => format!("{what} · PID {p}"),
            (true, [_, _, ..]) => {
                let named: Vec<String> = pids.iter().take(3).map(u32::to_string).collect();
                let more = match pids.len() {
                    n if n > 3 => format!(" +{}", n - 3),
                    _ => String::new(),
                };
                format!("{what} · PIDs {}{more}", named.join(", "))
            }
            _ => what,
        };
        c.vline_label(t, class, &label);
    }
}

pub fn proc_chart(run: &Run, p: &ProcRun, idx: usize) -> Drawn {
    let growth: Vec<&AlertLine> = run
        .alerts
        .iter()
        .filter(|a| {
            a.kind == AlertKind::Growth
                && a.pid == Some(p.pid)
                && Some(a.gpu) == p.gpu
                && matches!(a.change, Change::Raised | Change::Worsened)
        })
        .collect();
    // The first forecast and the latest: what it said at first and what it said last.
    let mut shown: Vec<&AlertLine> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for a in &growth {
        if keys.insert(a.key()) {
            shown.push(a);
        }
    }
    if let Some(last) = growth.last()
        && !shown.iter().any(|s| std::ptr::eq(*s, *last))
    {
        shown.push(last);
    }
    let run_len = (run.end - run.start).max(1000);
    let mut t1 = run.end;
    for a in &shown {
        if let Some(ms) = a.evidence.forecast.as_ref().and_then(|f| f.ms) {
            t1 = t1.max(a.at + ms);
        }
    }
    t1 = t1.min(run.start + (run_len as f64 * MAX_STRETCH) as i64);
    let d = p.dev.as_ref();
    let epochs: Vec<(Ts, u64)> = d
        .map(|d| d.epochs.iter().map(|e| (e.t, e.epoch)).collect())
        .unwrap_or_default();
    let floors: Vec<(Ts, u64)> = d
        .map(|d| {
            d.epochs
                .iter()
                .filter_map(|e| Some((e.t, e.floor?)))
                .collect()
        })
        .unwrap_or_default();
    let peaks: Vec<(Ts, u64)> = d
        .map(|d| {
            d.epochs
                .iter()
                .filter_map(|e| Some((e.t, e.peak?)))
                .collect()
        })
        .unwrap_or_default();
    let mut ymax: f64 = 0.0;
    for r in [
        Some(&p.nvml),
        d.map(|d| &d.allocated),
        d.map(|d| &d.reserved),
    ]
    .into_iter()
    .flatten()
    .filter_map(|s| s.range())
    {
        ymax = ymax.max(r.1);
    }
    for (_, v) in floors.iter().chain(&peaks) {
        ymax = ymax.max(*v as f64);
    }
    let data_max = ymax;
    // A ceiling far above the data (a slow leak forecast against a whole card) would flatten
    // the leak into the axis: the chart keeps the data's scale and names the ceiling above it.
    let on_scale = |v: u64| (v as f64) <= data_max * 3.0;
    for a in &shown {
        if let Some(f) = &a.evidence.forecast
            && on_scale(f.ceiling)
        {
            ymax = ymax.max(f.ceiling as f64);
        }
    }
    // The limit, unless far above the data or already drawn as a forecast's ceiling.
    let limit = d.and_then(|d| d.limit).filter(|l| {
        (*l as f64) <= data_max * 3.0
            && !shown.iter().any(|a| {
                a.evidence
                    .forecast
                    .as_ref()
                    .is_some_and(|f| f.ceiling.abs_diff(*l) <= *l / 100)
            })
    });
    if let Some(l) = limit {
        ymax = ymax.max(l as f64);
    }
    // A process NVML alone saw has one line to show: a lower chart.
    let height = if d.is_none() { HEIGHT * 0.72 } else { HEIGHT };
    let mut c = Chart::new(run.start, t1, ymax, height);
    c.axes();
    let gap = gap_ms(run);
    let mut legend = vec![];
    if !p.nvml.is_empty() {
        c.series(&p.nvml, "nvml", gap);
        legend.push(("nvml".into(), "used (NVML)".into()));
    }
    if let Some(d) = d {
        if !d.reserved.is_empty() {
            c.series(&d.reserved, "resv", gap);
            legend.push(("resv".into(), "reserved (allocator)".into()));
        }
        if !d.allocated.is_empty() {
            c.series(&d.allocated, "alloc", gap);
            legend.push(("alloc".into(), "allocated (allocator)".into()));
        }
    }
    if !floors.is_empty() {
        c.points(&floors, "floor");
        legend.push(("floor".into(), "epoch floor".into()));
    }
    if !peaks.is_empty() {
        c.points(&peaks, "peak");
        legend.push(("peak".into(), "epoch peak".into()));
    }
    c.epoch_ticks(&epochs);
    if let Some(l) = limit {
        c.hline(l, "limit", &format!("allocator limit {}", human(l)), true);
    }
    let mut forecasts = vec![];
    for a in &shown {
        draw_growth(&mut c, a, ymax);
        forecasts.push(forecast_words(run, a));
    }
    if !shown.is_empty() {
        legend.push(("fit".into(), "growth alert: fitted line".into()));
        legend.push(("forecast".into(), "its forecast, to the ceiling".into()));
    }
    alert_marks(
        &mut c,
        run,
        |a| a.pid == Some(p.pid) && Some(a.gpu) == p.gpu,
        false,
    );
    if t1 > run.end {
        c.vline(run.end, "endline", "recording ends");
    }
    let gpu = p
        .gpu
        .map_or("an unplaced GPU".into(), |g| format!("GPU {g}"));
    let title = format!("PID {} on {gpu}: memory over time", p.pid);
    drawn(c, &format!("proc-{idx}"), &title, legend, forecasts)
}

/// The points a growth alert was judged on, its Theil–Sen line through them, and its
/// forecast from the last point to the ceiling at the time it gave.
/// A ceiling above `top` (the chart's scale) is named at the top, the forecast drawn to
/// where it leaves the chart.
fn draw_growth(c: &mut Chart, a: &AlertLine, top: f64) {
    let e = &a.evidence;
    let pts: Vec<(Ts, u64)> = e.points.iter().map(|p| (p.t, p.bytes)).collect();
    c.points(&pts, "evpt");
    let (Some(slope), Some(first), Some(last)) = (e.slope, e.points.first(), e.points.last())
    else {
        return;
    };
    // Theil–Sen's intercept: the median of y − slope·x.
    let mut b: Vec<f64> = e
        .points
        .iter()
        .map(|p| p.bytes as f64 - slope * p.x as f64)
        .collect();
    b.sort_by(f64::total_cmp);
    let icpt = b[b.len() / 2];
    let fit = |x: i64| icpt + slope * x as f64;
    c.segment((first.t, fit(first.x)), (last.t, fit(last.x)), "fit");
    if let Some(f) = &e.forecast
        && let Some(ms) = f.ms
    {
        let end = a.at + ms;
        let (y0, ceil) = (fit(last.x), f.ceiling as f64);
        let what = match f.at_epoch {
            Some(ep) => format!("forecast OOM, epoch {ep:.0}"),
            None => "forecast OOM".into(),
        };
        let ceiling = format!("ceiling {} ({})", human(f.ceiling), f.ceiling_source);
        if ceil > top && ceil > y0 {
            // Where the forecast line crosses the top of the chart.
            let share = ((top - y0) / (ceil - y0)).clamp(0.0, 1.0);
            let out = last.t + ((end - last.t) as f64 * share) as i64;
            c.segment((last.t, y0), (out, top), "forecast");
            c.label_at(top, "ceiling", &format!("↑ {ceiling}, above this scale"));
            c.label_at(top, "forecast", &format!("{what} →"));
            return;
        }
        c.segment((last.t, y0), (end, ceil), "forecast");
        c.hline(f.ceiling, "ceiling", &ceiling, false);
        if c.contains(end) {
            c.vline(end, "forecast", &what);
        } else {
            c.label_at(f.ceiling as f64, "forecast", &format!("{what} →"));
        }
    }
}

/// `Raised 0:54 (epoch 13): +32.0 MiB per epoch, forecast OOM at epoch 91 (~3 min later) —
/// the OOM came at epoch 20, 15s after.`
fn forecast_words(run: &Run, a: &AlertLine) -> String {
    let e = &a.evidence;
    let rate = e
        .slope
        .map(|s| human(s.max(0.0) as u64))
        .unwrap_or_default();
    let f = e.forecast.as_ref().map(|f| {
        let when = match (f.at_epoch, f.ms) {
            (Some(ep), Some(ms)) => {
                format!("epoch {ep:.0} ({} later)", crate::fmt::rough_duration(ms))
            }
            (Some(ep), None) => format!("epoch {ep:.0}"),
            (None, Some(ms)) => crate::fmt::rough_duration(ms),
            (None, None) => format!("{:.0} steps", f.steps),
        };
        format!(
            ", forecast OOM at {when} at a ceiling of {}",
            human(f.ceiling)
        )
    });
    format!(
        "{} {}: +{rate} per {}{}. {}",
        capital(a.change.label()),
        crate::report::summary::when(run, a.at, a.epoch),
        e.unit.as_ref().map_or("epoch".into(), |u| u.to_string()),
        f.unwrap_or_default(),
        crate::report::summary::growth_outcome(run, a)
    )
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// A command line cut to fit a legend.
pub fn short(s: &str) -> String {
    cut(s, 60)
}

/// A command line as a process's card shows it: whole up to a few lines (the arguments
/// that tell runs apart come last: `--name slow_leak_4`), cut only when it is a script.
pub fn card_command(s: &str) -> String {
    cut(s, 400)
}

fn cut(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max - 1).collect::<String>() + "…"
    }
}
