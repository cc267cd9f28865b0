//! Steady growth ("leak") rule: a robust trend (`trend`) on one point per epoch (or per
//! fixed time window when there are no epoch markers), with effect-size gates so that
//! allocator jitter, eval spikes, step changes and warm-up ramps never fire, and a
//! forecast of when it meets its ceiling.

use crate::fmt::human;
use crate::model::time::Ts;

use super::config::GrowthConfig;
use super::format::{fit_summary, p_value, steps, who};
use super::inputs::{Envelope, EpochPoint, WindowPoint};
use super::stats::median;
use super::trend::{Trace, TrendTest, current_rate, detect_confirmed, epoch_trends, usable_epochs};
use super::workset;
use super::{
    AlertKey, AlertKind, Basis, CeilingSource, Evidence, Finding, Forecast, Severity, StepUnit,
    TrendSeries,
};
use crate::fmt::{compact, rough_duration, rough_duration_short};

/// A positive rate in words (`100 MiB`); the sentence says "rose by".
fn per(bytes: f64) -> String {
    human(bytes.max(0.0).round() as u64)
}

/// A rate in a summary: `100M`, `1.5G`.
fn short_bytes(bytes: f64) -> String {
    compact(bytes.max(0.0) as u64)
        .replace("MiB", "M")
        .replace("GiB", "G")
}

/// Where the forecast's ceiling comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling {
    pub bytes: u64,
    pub source: CeilingSource,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GrowthContext {
    pub pid: u32,
    pub gpu: u32,
    /// Card total (or allocator limit): the scale of the relative growth gate.
    pub capacity: u64,
    /// What the growing quantity runs into; `None`: no forecast.
    pub ceiling: Option<Ceiling>,
    /// Epoch in progress, for `raised_epoch`.
    pub current_epoch: Option<u64>,
    pub last_epoch: Option<u64>,
    /// Whether a growth / cache-growth alert is active (hysteresis).
    pub growth_active: bool,
    pub cache_active: bool,
    /// The range of the process's usable epochs older than the points given.
    pub envelope: Envelope,
    /// The floor is exact (an allocator's count after gc, the interposer's live bytes):
    /// judged with noise-scaled gates (`GrowthConfig::exact`).
    pub exact: bool,
}

/// Milliseconds per x unit over the window (median, robust to a slow eval epoch).
fn ms_per_step(w: &Trace) -> Option<f64> {
    let mut r: Vec<f64> = (1..w.len())
        .filter_map(|i| {
            let dx = w.x[i] - w.x[i - 1];
            (dx > 0.0).then(|| (w.t[i] - w.t[i - 1]) as f64 / dx)
        })
        .filter(|v| *v > 0.0)
        .collect();
    median(&mut r)
}

fn forecast(
    current: u64,
    rate_per_step: f64,
    ceiling: &Ceiling,
    ms_per_step: Option<f64>,
    last_x: Option<f64>,
) -> Forecast {
    let left = ceiling.bytes.saturating_sub(current) as f64;
    let steps = if rate_per_step > 0.0 {
        left / rate_per_step
    } else {
        f64::INFINITY
    };
    forecast_in(steps, current, rate_per_step, ceiling, ms_per_step, last_x)
}

/// The forecast that the ceiling is met `steps` steps after `last_x`.
fn forecast_in(
    steps: f64,
    current: u64,
    rate_per_step: f64,
    ceiling: &Ceiling,
    ms_per_step: Option<f64>,
    last_x: Option<f64>,
) -> Forecast {
    let steps = if steps.is_finite() {
        (steps * 100.0).round() / 100.0
    } else {
        1e12
    };
    Forecast {
        ceiling: ceiling.bytes,
        ceiling_source: ceiling.source.clone(),
        current,
        rate: rate_per_step.round(),
        steps,
        ms: ms_per_step.map(|m| (m * steps).min(i64::MAX as f64 / 2.0) as i64),
        at_epoch: last_x.map(|x| x + steps),
    }
}

/// Severity follows the forecast: critical when the OOM is near (or before the run's last
/// epoch), info when it is days away, warning in between and when there is no forecast.
fn severity(f: Option<&Forecast>, cfg: &GrowthConfig, last_epoch: Option<u64>) -> Severity {
    let Some(f) = f else {
        return Severity::Warning;
    };
    let before_end = match (f.at_epoch, last_epoch) {
        (Some(at), Some(last)) => at <= last as f64,
        _ => false,
    };
    if f.steps < cfg.critical_epochs || before_end {
        Severity::Critical
    } else if f.ms.is_some_and(|ms| ms >= cfg.info_after_ms) {
        Severity::Info
    } else {
        Severity::Warning
    }
}

fn forecast_sentence(f: &Forecast, unit: StepUnit) -> String {
    let when = match f.ms {
        Some(ms) => format!(", {} at the current rate", rough_duration(ms)),
        None => " at the current rate".into(),
    };
    if f.steps < 1.0 && f.current >= f.ceiling {
        return format!(
            "It is already at the ceiling of {} ({}).",
            compact(f.ceiling),
            f.ceiling_source
        );
    }
    format!(
        "OOM in {} {unit}s{when} (ceiling {}: {}).",
        steps(f.steps),
        compact(f.ceiling),
        f.ceiling_source
    )
}

/// The forecast in a summary (`, OOM 12ep`, `, OOM 31h`): epochs are what a person counts
/// through, a count of windows means little, so windows say how long when known.
fn summary_forecast(f: Option<&Forecast>, unit: StepUnit) -> String {
    let short = match unit {
        StepUnit::Epoch => "ep",
        _ => "w",
    };
    match f {
        None => String::new(),
        Some(f) if f.steps >= 1e6 => String::new(),
        Some(f) if f.steps < 1.0 => format!(", OOM <1{short}"),
        Some(f) if unit == StepUnit::Epoch => format!(", OOM {:.0}{short}", f.steps),
        Some(f) => match f.ms {
            Some(ms) => format!(", OOM {}", rough_duration_short(ms)),
            None => format!(", OOM {:.0}{short}", f.steps),
        },
    }
}

fn evidence(
    test: &TrendTest,
    basis: Basis,
    series: TrendSeries,
    unit: StepUnit,
    fc: Option<Forecast>,
) -> Evidence {
    Evidence {
        basis,
        series: Some(series),
        unit: Some(unit),
        points: test.window.points(),
        slope: Some(test.slope),
        p_value: Some(test.p),
        gates: test.gates.clone(),
        forecast: fc,
        values: Vec::new(),
        count: None,
    }
}

/// The growth rule on per-epoch points: a `Growth` finding when the floor or the peak
/// rises, a `CacheGrowth` finding when only reserved rises.
pub fn epoch_growth(
    points: &[EpochPoint],
    baseline_from: Option<Ts>,
    ctx: &GrowthContext,
    cfg: &GrowthConfig,
) -> Option<Finding> {
    // The trend tests depend on the points only; they change once an epoch.
    let trends = epoch_trends(
        points,
        baseline_from,
        ctx.capacity,
        ctx.exact,
        (ctx.growth_active, ctx.cache_active),
        &ctx.envelope,
        cfg,
    );
    let floor_t = trends.floor.clone();
    // The peak decides the forecast when it trends too; the floor alone otherwise.
    let peak_t = trends.peak.clone();
    let last = trends.last.as_ref()?;
    if floor_t.is_none() && peak_t.is_none() && trends.reserved.is_none() {
        // No trend: nothing to word (the usual answer, every second).
        return None;
    }
    let epoch_now = ctx.current_epoch.or(Some(last.epoch));
    let who_s = who(Some(ctx.pid), ctx.gpu);
    let head = format!("PID {} on GPU {}", ctx.pid, ctx.gpu);

    if floor_t.is_some() || peak_t.is_some() {
        // The peak is what meets the ceiling; a floor leak lifts it just as much.
        let (main, series) = match (&floor_t, &peak_t) {
            (Some(f), None) => (f, TrendSeries::Floor),
            (_, Some(p)) => (
                p,
                if floor_t.is_some() {
                    TrendSeries::Floor
                } else {
                    TrendSeries::Peak
                },
            ),
            (None, None) => return None,
        };
        let current = last.peak.unwrap_or(last.floor);
        // The level that meets the ceiling is the peak, but the rate is the floor's when
        // the floor trends: floors are read at one phase point each epoch, while an epoch
        // peak is a sampled maximum (or an allocator's lifetime peak, which stands still
        // and then jumps: JAX's moved in steps of 90-130 MB on the second alert corpus and
        // made the peak's rate read half again too fast).
        let rate_of = floor_t.as_ref().unwrap_or(main);
        let floor_rate = floor_t
            .as_ref()
            .map_or(0.0, |f| current_rate(&f.window, cfg.min_window, f.slope));
        let ms_step = ms_per_step(&main.window);
        let mut fc = ctx.ceiling.as_ref().map(|c| {
            forecast(
                current,
                current_rate(&rate_of.window, cfg.min_window, rate_of.slope),
                c,
                ms_step,
                Some(last.epoch as f64),
            )
        });
        // The working set (peak above floor) may be what grows: a curriculum or growing
        // sequences make the step's peak meet the limit long before a slowly rising floor
        // would. Its crossing, with the floor's own rise added, wins when it comes first.
        // On an exact floor the peak is the allocator's too: judged from the first epoch.
        let ws_cfg = if ctx.exact { cfg.exact() } else { cfg.clone() };
        let ws = workset::trend(&usable_epochs(points, baseline_from, &ws_cfg), &ws_cfg)
            .filter(|w| w.last_x == last.epoch as f64);
        let ws_fc = ws.as_ref().zip(ctx.ceiling.as_ref()).and_then(|(w, c)| {
            let steps = workset::epochs_to(w, last.floor as f64, floor_rate, c.bytes as f64)?;
            Some(forecast_in(
                steps,
                (last.floor as f64 + w.now).round() as u64,
                w.bytes_per_epoch() + floor_rate,
                c,
                ms_step,
                Some(last.epoch as f64),
            ))
        });
        let by_workset = match (&ws_fc, &fc) {
            (Some(w), Some(f)) => w.steps < f.steps,
            (Some(_), None) => true,
            _ => false,
        };
        if by_workset {
            fc = ws_fc;
        }
        let sev = severity(fc.as_ref(), cfg, ctx.last_epoch);
        let shown = floor_t.as_ref().unwrap_or(main);
        let n = shown.window.len();
        let (first_e, last_e) = (shown.window.x[0] as i64, shown.window.x[n - 1] as i64);
        let what = if let (true, Some(w)) = (by_workset, &ws) {
            let grows = if w.geometric {
                format!("grows {:.1} % per epoch", 100.0 * w.rate)
            } else {
                format!("grows by {} per epoch", per(w.rate))
            };
            let floor_too = if floor_t.is_some() {
                format!(
                    " The floor also rose by {} per epoch over epochs {first_e}–{last_e}.",
                    per(shown.slope)
                )
            } else {
                String::new()
            };
            format!(
                "the working set (each epoch's peak above its floor, now {}) {grows} over epochs {}–{} (Theil–Sen{}; Mann–Kendall {}), not a leak: each epoch needs more transient memory (a curriculum, growing batches or sequence lengths, a cache filled during the step), and the step's peak is what meets the limit.{floor_too}",
                human(w.now.max(0.0) as u64),
                w.first_x as i64,
                w.last_x as i64,
                if w.geometric { " on its logarithm" } else { "" },
                p_value(w.p)
            )
        } else if floor_t.is_some() {
            format!(
                "the allocated floor at each epoch end rose by {} per epoch over epochs {first_e}–{last_e} (Theil–Sen; Mann–Kendall {}): a steady leak, usually tensors kept alive across epochs (accumulated losses, growing lists or caches).",
                per(shown.slope),
                p_value(shown.p)
            )
        } else {
            format!(
                "the epoch peak rose by {} per epoch over epochs {first_e}–{last_e} (Theil–Sen; Mann–Kendall {}) while the floor stayed flat: each epoch needs more transient memory (growing batches or sequences, or a cache filled during the step).",
                per(main.slope),
                p_value(main.p)
            )
        };
        let fc_s = fc
            .as_ref()
            .map(|f| format!(" {}", forecast_sentence(f, StepUnit::Epoch)))
            .unwrap_or_default();
        let (label, rate_s) = match (&ws, by_workset) {
            (Some(w), true) if w.geometric => ("peak", format!("{:.0}%", 100.0 * w.rate)),
            (Some(w), true) => ("peak", short_bytes(w.rate)),
            _ if floor_t.is_some() => ("leak", short_bytes(shown.slope)),
            _ => ("peak", short_bytes(shown.slope)),
        };
        let summary = format!(
            "{who_s} {label} +{rate_s}/ep{}",
            summary_forecast(fc.as_ref(), StepUnit::Epoch)
        );
        let series = if by_workset {
            TrendSeries::Peak
        } else {
            series
        };
        return Some(Finding {
            key: AlertKey {
                kind: AlertKind::Growth,
                pid: Some(ctx.pid),
                gpu: ctx.gpu,
            },
            severity: sev,
            message: format!("{head}: {what}{fc_s}"),
            summary: fit_summary(summary),
            evidence: evidence(shown, Basis::Epochs, series, StepUnit::Epoch, fc),
            epoch: epoch_now,
        });
    }

    let cache_t = trends.reserved.clone()?;
    let n = cache_t.window.len();
    let (first_e, last_e) = (cache_t.window.x[0] as i64, cache_t.window.x[n - 1] as i64);
    let message = format!(
        "{head}: reserved memory rose by {} per epoch over epochs {first_e}–{last_e} (Mann–Kendall {}) while allocated stayed flat: the allocator's cache is growing or fragmenting, not a leak. The fragmentation panel shows whether its holes still fit the largest request.",
        per(cache_t.slope),
        p_value(cache_t.p)
    );
    let summary = format!(
        "{who_s} cache +{}/ep, not a leak",
        compact(cache_t.slope.max(0.0) as u64)
            .replace("MiB", "M")
            .replace("GiB", "G")
    );
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::CacheGrowth,
            pid: Some(ctx.pid),
            gpu: ctx.gpu,
        },
        severity: Severity::Info,
        message,
        summary: fit_summary(summary),
        evidence: evidence(
            &cache_t,
            Basis::Epochs,
            TrendSeries::Reserved,
            StepUnit::Epoch,
            None,
        ),
        epoch: epoch_now,
    })
}

/// Epoch markers without a readable framework (CuPy, a CUDA library the companion does
/// not know): NVML's bytes at each marker are the floor. Coarser than an allocator's floor
/// (the cache and the context are in it), and the message says so.
pub fn nvml_epoch_growth(
    points: &[EpochPoint],
    ctx: &GrowthContext,
    cfg: &GrowthConfig,
) -> Option<Finding> {
    let ctx = GrowthContext {
        exact: false,
        ..ctx.clone()
    };
    epoch_growth(points, None, &ctx, cfg).map(|mut f| {
        f.message = f.message.replace(
            "the allocated floor at each epoch end",
            "the process's NVML usage at each epoch marker (no framework gpumon can read: the allocator's cache and the CUDA context are in it)",
        );
        f.evidence.series = Some(TrendSeries::NvmlEpochs);
        f.evidence.basis = Basis::Nvml;
        f
    })
}

/// Which numbers the fixed windows summarise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// The companion's `allocated` (no epoch markers).
    Allocated,
    /// NVML per-process usage (no companion): includes the allocator's cache.
    Nvml,
    /// The native interposer's live bytes: every allocation, no cache.
    Exact,
}

impl WindowSource {
    /// Window width for this source (`growth.window_ms`, `nvml_window_ms`, `exact_window_ms`).
    pub fn width_ms(self, cfg: &GrowthConfig) -> i64 {
        match self {
            WindowSource::Allocated => cfg.window_ms,
            WindowSource::Nvml => cfg.nvml_window_ms,
            WindowSource::Exact => cfg.exact_window_ms,
        }
    }
}

/// "10-second", "20-second", "10-minute".
fn width_words(ms: i64) -> String {
    if ms < 60_000 || ms % 60_000 != 0 {
        format!("{}-second", (ms as f64 / 1000.0).round())
    } else {
        format!("{}-minute", ms / 60_000)
    }
}

/// Fallback without epoch markers: the same trend machinery on the minimum of each fixed
/// time window. Coarser, and the message says so.
pub fn window_growth(
    points: &[WindowPoint],
    source: WindowSource,
    ctx: &GrowthContext,
    cfg: &GrowthConfig,
) -> Option<Finding> {
    let mut tr = Trace::default();
    for p in points {
        tr.x.push(p.index as f64);
        tr.t.push(p.t);
        tr.y.push(p.min);
    }
    // The interposer's live bytes and the allocator's allocated count are exact: judged on
    // their noise (windows have their own time warm-up, so the epoch warm-up does not apply).
    let exact_cfg = GrowthConfig {
        warmup_epochs: cfg.warmup_epochs,
        ..cfg.exact()
    };
    let gates = if source != WindowSource::Nvml {
        &exact_cfg
    } else {
        cfg
    };
    let test = detect_confirmed(&tr, ctx.capacity, gates, ctx.growth_active)?;
    let last = points.last()?;
    let width = source.width_ms(cfg);
    let width_s = width_words(width);
    let fc = ctx.ceiling.as_ref().map(|c| {
        let rate = current_rate(&test.window, cfg.min_window, test.slope);
        forecast(last.min, rate, c, Some(width as f64), None)
    });
    let sev = severity(fc.as_ref(), cfg, None);
    let (what, coarse) = match source {
        WindowSource::Allocated => (
            "allocated memory (lowest value in each",
            "This is coarser than per-epoch data: without epoch markers a window's minimum is not taken at a fixed phase of training.",
        ),
        WindowSource::Nvml => (
            "NVML memory usage (lowest value in each",
            "This is coarser than per-epoch data: NVML counts the allocator's cache and the CUDA context, so cache growth looks the same as a leak; run the companion for epoch-level detail.",
        ),
        WindowSource::Exact => (
            "live device allocations seen by the interposer (lowest value in each",
            "The interposer counts every allocation the program holds, with no allocator cache in between, so a steady rise is the program keeping memory; without epoch markers a window's minimum is not taken at a fixed phase (mark epochs with GPUMON_EPOCH_SIGNAL or gpumon_epoch() for epoch-level detail).",
        ),
    };
    let fc_s = fc
        .as_ref()
        .map(|f| format!(" {}", forecast_sentence(f, StepUnit::Window)))
        .unwrap_or_default();
    let message = format!(
        "PID {} on GPU {}: {what} {width_s} window) rose by {} per window over the last {} windows (Theil–Sen; Mann–Kendall {}). {coarse}{fc_s}",
        ctx.pid,
        ctx.gpu,
        per(test.slope),
        test.window.len(),
        p_value(test.p)
    );
    let summary = format!(
        "{} grows +{}/{}{}",
        who(Some(ctx.pid), ctx.gpu),
        compact(test.slope.max(0.0) as u64)
            .replace("MiB", "M")
            .replace("GiB", "G"),
        if width < 60_000 {
            format!("{}s", width / 1000)
        } else {
            format!("{}m", width / 60_000)
        },
        summary_forecast(fc.as_ref(), StepUnit::Window)
    );
    let series = match source {
        WindowSource::Allocated => TrendSeries::AllocatedWindows,
        WindowSource::Nvml => TrendSeries::NvmlWindows,
        WindowSource::Exact => TrendSeries::InterposerWindows,
    };
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::Growth,
            pid: Some(ctx.pid),
            gpu: ctx.gpu,
        },
        severity: sev,
        message,
        summary: fit_summary(summary),
        evidence: evidence(&test, Basis::TimeWindows, series, StepUnit::Window, fc),
        epoch: ctx.current_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::{GIB_U64, MIB_U64};

    const M: u64 = MIB_U64;

    fn ctx() -> GrowthContext {
        GrowthContext {
            pid: 4242,
            gpu: 0,
            capacity: 80 * GIB_U64,
            ceiling: Some(Ceiling {
                bytes: 80 * GIB_U64,
                source: CeilingSource::CardNotHeld,
            }),
            current_epoch: None,
            last_epoch: None,
            growth_active: false,
            cache_active: false,
            exact: false,
            envelope: Envelope::default(),
        }
    }

    fn epochs(floor: impl Fn(u64) -> u64, peak_extra: u64, n: u64) -> Vec<EpochPoint> {
        (0..n)
            .map(|e| EpochPoint {
                epoch: e,
                t: (e as i64 + 1) * 600_000,
                floor: floor(e),
                peak: Some(floor(e) + peak_extra),
                reserved: Some(floor(e) + peak_extra + 512 * M),
            })
            .collect()
    }

    #[test]
    fn bert_story_leak_is_found_by_epoch_7_with_forecast() {
        // 100 MiB per epoch from 10 GiB on an 80 GiB card, 10 min per epoch.
        let pts = epochs(|e| 10 * GIB_U64 + e * 100 * M, 4 * GIB_U64, 8);
        assert!(
            epoch_growth(&pts[..6], None, &ctx(), &Default::default()).is_none(),
            "only 5 usable points"
        );
        let f = epoch_growth(&pts, None, &ctx(), &Default::default()).expect("leak detected");
        assert_eq!(f.key.kind, AlertKind::Growth);
        // 669 epochs of 10 minutes: the OOM is days away, so the severity is info.
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.evidence.series, Some(TrendSeries::Floor));
        let slope = f.evidence.slope.expect("slope");
        assert!((slope - 100.0 * M as f64).abs() < 1.0, "{slope}");
        let fc = f.evidence.forecast.as_ref().expect("forecast");
        // (80 − 14.68 GiB) / 100 MiB ≈ 669 epochs, 10 min each.
        assert!((fc.steps - 668.8).abs() < 1.0, "{}", fc.steps);
        assert!(
            f.message
                .contains("OOM in ≈ 669 epochs, ~5 days at the current rate"),
            "{}",
            f.message
        );
        assert!(f.message.contains("a steady leak"));
        assert!(f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX);
        assert!(
            f.summary.starts_with("4242@0 leak +100M/ep"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn flat_floor_with_jitter_and_eval_spikes_is_silent() {
        let pts = epochs(
            |e| 10 * GIB_U64 + (e % 3) * 300 * 1024 + if e % 5 == 0 { 2 * GIB_U64 } else { 0 },
            GIB_U64,
            40,
        );
        for end in 6..=40 {
            assert!(
                epoch_growth(&pts[..end], None, &ctx(), &Default::default()).is_none(),
                "fired at {end}"
            );
        }
    }

    #[test]
    fn single_step_change_is_not_a_leak() {
        let pts = epochs(
            |e| if e < 9 { 10 * GIB_U64 } else { 12 * GIB_U64 },
            GIB_U64,
            30,
        );
        for end in 6..=30 {
            assert!(
                epoch_growth(&pts[..end], None, &ctx(), &Default::default()).is_none(),
                "fired at {end}"
            );
        }
    }

    #[test]
    fn peak_growth_with_flat_floor_is_reported_as_peak() {
        let pts = epochs(|_| 10 * GIB_U64, 0, 12)
            .into_iter()
            .map(|mut p| {
                p.peak = Some(p.floor + GIB_U64 + p.epoch * 200 * M);
                p
            })
            .collect::<Vec<_>>();
        let f = epoch_growth(&pts, None, &ctx(), &Default::default()).expect("peak growth");
        assert_eq!(f.evidence.series, Some(TrendSeries::Peak));
        assert!(f.message.contains("while the floor stayed flat"));
    }

    #[test]
    fn reserved_rising_with_flat_allocated_is_cache_growth() {
        let pts: Vec<EpochPoint> = epochs(|_| 10 * GIB_U64, GIB_U64, 12)
            .into_iter()
            .map(|mut p| {
                p.reserved = Some(12 * GIB_U64 + p.epoch * 300 * M);
                p
            })
            .collect();
        let f = epoch_growth(&pts, None, &ctx(), &Default::default()).expect("cache growth");
        assert_eq!(f.key.kind, AlertKind::CacheGrowth);
        assert_eq!(f.severity, Severity::Info);
        assert!(f.message.contains("not a leak"));
    }

    #[test]
    fn critical_when_close_to_ceiling_or_before_last_epoch() {
        let pts = epochs(|e| 71 * GIB_U64 + e * GIB_U64 / 2, GIB_U64, 9);
        let f = epoch_growth(&pts, None, &ctx(), &Default::default()).expect("leak");
        // peak 76 GiB at epoch 8, 0.5 GiB/epoch → 8 epochs left.
        assert_eq!(f.severity, Severity::Critical);
        let pts = epochs(|e| 10 * GIB_U64 + e * GIB_U64 / 2, GIB_U64, 9);
        let mut c = ctx();
        c.last_epoch = Some(200);
        let f = epoch_growth(&pts, None, &c, &Default::default()).expect("leak");
        assert_eq!(
            f.severity,
            Severity::Critical,
            "dies at ≈ epoch 144 before 200"
        );
        c.last_epoch = Some(100);
        let f = epoch_growth(&pts, None, &c, &Default::default()).expect("leak");
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn warmup_epoch_and_pre_baseline_points_are_ignored() {
        // Epoch 0 jumps by 20 GiB (optimizer state): not part of any trend.
        let mut pts = epochs(|_| 10 * GIB_U64, GIB_U64, 10);
        pts[0].floor = GIB_U64;
        assert!(epoch_growth(&pts, None, &ctx(), &Default::default()).is_none());
        // A batch-size change at epoch 5 restarts the series.
        let pts = epochs(|e| 10 * GIB_U64 + e * 100 * M, 0, 12);
        let baseline = pts[6].t;
        assert!(epoch_growth(&pts, Some(baseline), &ctx(), &Default::default()).is_none());
    }

    #[test]
    fn sticky_alert_survives_one_bad_epoch_but_a_new_one_needs_two() {
        // Epochs 1..6 rise; epoch 7 drops below all of them (one bad reading).
        let mut pts = epochs(|e| 10 * GIB_U64 + e * 64 * M, 0, 8);
        pts[7].floor = 9 * GIB_U64;
        pts[7].peak = Some(9 * GIB_U64);
        pts[7].reserved = Some(9 * GIB_U64);
        let cfg = GrowthConfig::default();
        assert!(
            epoch_growth(&pts[..7], None, &ctx(), &cfg).is_none(),
            "one ending only"
        );
        assert!(
            epoch_growth(&pts, None, &ctx(), &cfg).is_none(),
            "new alert needs both endings"
        );
        let mut c = ctx();
        c.growth_active = true;
        assert!(epoch_growth(&pts, None, &c, &cfg).is_some());
    }

    #[test]
    fn nvml_window_fallback_says_it_is_coarser() {
        let w: Vec<WindowPoint> = (0..8)
            .map(|i| WindowPoint {
                index: i,
                t: (i + 1) * 600_000,
                min: 20 * GIB_U64 + i as u64 * 200 * M,
            })
            .collect();
        let cfg = GrowthConfig {
            nvml_window_ms: 600_000,
            ..GrowthConfig::default()
        };
        let f = window_growth(&w, WindowSource::Nvml, &ctx(), &cfg).expect("growth");
        assert_eq!(f.evidence.basis, Basis::TimeWindows);
        assert!(f.message.contains("coarser"), "{}", f.message);
        assert!(f.message.contains("10-minute window"));
        let fc = f.evidence.forecast.expect("forecast");
        assert_eq!(fc.ms, Some((fc.steps * 600_000.0) as i64));
        assert!(
            f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX,
            "{}",
            f.summary
        );
    }

    #[test]
    fn sixteen_mib_per_epoch_is_caught_within_eight_epochs() {
        let pts = epochs(|e| 10 * GIB_U64 + e * 16 * M, 0, 9);
        let f = epoch_growth(&pts, None, &ctx(), &Default::default());
        assert!(f.is_some(), "epochs 1..8 should suffice");
    }
}
