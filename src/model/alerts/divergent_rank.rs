//! The rank that differs. The ranks of a data-parallel job run the same step on batches of
//! the same shape, so their memory should match, epoch after epoch; the multi-day failure
//! is one rank that keeps more (rank 0 logs or evaluates and keeps the tensors; one shard
//! has the longest sequences) and dies first, taking the job with it.
//!
//! Compared per epoch: each rank's floor (and peak) minus the median of its peers' at the
//! same epoch, its *excess*. A constant excess (rank 0's extra buffers, a shard's slightly
//! larger batches) is the job's shape, not a problem: only an excess that grows, beyond
//! the spread the peers show among themselves and the excess's own epoch-to-epoch wobble,
//! on most epochs of a trailing window (so an uneven last batch or a one-off step is not
//! it), and still at the newest epochs, is reported.

use crate::fmt::{MIB_U64, compact, human};

use super::format::{fit_summary, who};
use super::inputs::EpochPoint;
use super::stats::{median, theil_sen};
use super::{
    AlertKey, AlertKind, Basis, CeilingSource, Evidence, Finding, Forecast, Gate, GateName, Point,
    Severity, StepUnit, TrendSeries,
};

/// Thresholds (`AlertConfig::divergent_rank`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DivergentConfig {
    /// Epochs below this number are warm-up and not compared.
    pub warmup_epochs: u64,
    /// Fewest epochs every compared rank has completed before ranks are compared.
    pub min_epochs: usize,
    /// Most epochs a trailing window holds; every window from `min_epochs` up is tried,
    /// so a divergence that starts mid-run is seen.
    pub max_epochs: usize,
    /// The excess must grow over the window by this many times the peers' usual spread
    /// (and the excess's own typical epoch-to-epoch step)...
    pub spread_factor: f64,
    /// ...and by at least this many bytes.
    pub min_growth_bytes: u64,
    /// Share of the window's epochs in which the excess grew: it keeps diverging.
    pub widening_share: f64,
    /// The rule must hold on this many consecutive endings of the series.
    pub confirm: usize,
}

impl Default for DivergentConfig {
    fn default() -> Self {
        DivergentConfig {
            warmup_epochs: 1,
            min_epochs: 6,
            max_epochs: 20,
            spread_factor: 4.0,
            min_growth_bytes: 16 * MIB_U64,
            widening_share: 0.7,
            confirm: 2,
        }
    }
}

/// One rank of a job on one GPU, with its completed epochs.
#[derive(Debug, Clone, PartialEq)]
pub struct RankInput<'a> {
    pub pid: u32,
    pub gpu: u32,
    pub rank: Option<u32>,
    pub epochs: &'a [EpochPoint],
    /// What this rank can reach before it fails (allocator limit or what the card has
    /// left for it), for the job's forecast.
    pub ceiling: Option<(u64, CeilingSource)>,
    /// Mean wall-clock time of an epoch, for the forecast in time.
    pub epoch_ms: Option<f64>,
}

/// The ranks of one job that are still running.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInput<'a> {
    /// The job's name (`train.py@127.0.0.1:29500`), for the message.
    pub job: &'a str,
    pub ranks: Vec<RankInput<'a>>,
}

/// What one rank's excess did over one trailing window.
#[derive(Debug, Clone, PartialEq)]
struct Divergence {
    /// The epoch the excess began to grow; `open`: that epoch or an earlier one.
    since: u64,
    open: bool,
    series: TrendSeries,
    /// Epochs of the window and the rank's excess at each.
    epochs: Vec<(u64, i64, f64)>,
    /// Excess at the newest epoch, bytes.
    excess: f64,
    /// Theil–Sen slope of the excess, bytes per epoch.
    slope: f64,
    /// The rank's own slope, bytes per epoch (what runs into its ceiling).
    own_slope: f64,
    /// Its own value at the newest epoch.
    own_now: f64,
    growth: f64,
    noise: f64,
    gates: Vec<Gate>,
}

/// Findings for the ranks of `job` whose floor or peak diverges from their peers'.
pub fn check(job: &JobInput, cfg: &DivergentConfig) -> Vec<Finding> {
    if job.ranks.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..job.ranks.len() {
        if let Some(d) = remembered(job, i, cfg) {
            out.push(finding(job, &job.ranks[i], d));
        }
    }
    out
}

/// Rank `i`'s confirmed divergence: the floor when it shows it (allocated after the epoch,
/// the cleaner series), else the peak; and so at the endings before, for confirmation.
fn detect(job: &JobInput, i: usize, cfg: &DivergentConfig) -> Option<Divergence> {
    let at = |back| {
        [TrendSeries::Floor, TrendSeries::Peak]
            .into_iter()
            .find_map(|s| diverges(job, i, s, back, cfg))
    };
    let d = at(0)?;
    (1..cfg.confirm.max(1))
        .all(|back| at(back).is_some())
        .then_some(d)
}

/// Everything `detect` reads: the rank asked about, every rank's epochs, the thresholds.
type Key = (
    usize,
    Vec<usize>,
    Vec<(u64, i64, u64, Option<u64>)>,
    [u64; 7],
);

thread_local! {
    /// The engine evaluates every second; a job's epochs change once an epoch.
    static DIVERGED: std::cell::RefCell<super::memo::Memo<Key, Option<Divergence>>> =
        Default::default();
}

fn remembered(job: &JobInput, i: usize, cfg: &DivergentConfig) -> Option<Divergence> {
    use super::memo::mix;
    let lens: Vec<usize> = job.ranks.iter().map(|r| r.epochs.len()).collect();
    let points: Vec<(u64, i64, u64, Option<u64>)> = job
        .ranks
        .iter()
        .flat_map(|r| r.epochs.iter().map(|e| (e.epoch, e.t, e.floor, e.peak)))
        .collect();
    let c = [
        cfg.warmup_epochs,
        cfg.min_epochs as u64,
        cfg.max_epochs as u64,
        cfg.spread_factor.to_bits(),
        cfg.min_growth_bytes,
        cfg.widening_share.to_bits(),
        cfg.confirm as u64,
    ];
    let mut h = mix(i as u64, lens.len() as u64);
    for l in &lens {
        h = mix(h, *l as u64);
    }
    for p in &points {
        h = mix(
            mix(mix(mix(h, p.0), p.1 as u64), p.2),
            p.3.map_or(1, |v| v << 1),
        );
    }
    for v in c {
        h = mix(h, v);
    }
    let key: Key = (i, lens, points, c);
    if let Some(d) = DIVERGED.with(|m| m.borrow_mut().get(h, |k| *k == key)) {
        return d;
    }
    let d = detect(job, i, cfg);
    DIVERGED.with(|m| m.borrow_mut().put(h, key, d.clone()));
    d
}

/// The value of a series at an epoch.
fn value(e: &EpochPoint, series: &TrendSeries) -> Option<u64> {
    match series {
        TrendSeries::Peak => e.peak,
        _ => Some(e.floor),
    }
}

/// Rank `i`'s divergence in `series` over its best trailing window, the newest `back`
/// common epochs left out (confirmation looks at earlier endings).
fn diverges(
    job: &JobInput,
    i: usize,
    series: TrendSeries,
    back: usize,
    cfg: &DivergentConfig,
) -> Option<Divergence> {
    // Epochs every rank has completed with this series, past warm-up, oldest first.
    let mine = &job.ranks[i];
    let mut common: Vec<(u64, i64, Vec<u64>)> = Vec::new();
    for e in mine.epochs.iter().filter(|e| e.epoch >= cfg.warmup_epochs) {
        let Some(v) = value(e, &series) else { continue };
        let mut row = Vec::with_capacity(job.ranks.len());
        for (j, r) in job.ranks.iter().enumerate() {
            if j == i {
                row.push(v);
                continue;
            }
            match r.epochs.iter().rev().find(|p| p.epoch == e.epoch) {
                Some(p) => match value(p, &series) {
                    Some(x) => row.push(x),
                    None => break,
                },
                None => break,
            }
        }
        if row.len() == job.ranks.len() {
            common.push((e.epoch, e.t, row));
        }
    }
    common.truncate(common.len().checked_sub(back)?);
    if common.len() < cfg.min_epochs {
        return None;
    }
    // Each epoch: this rank's excess over its peers' median, and the peers' own spread.
    let rows: Vec<(u64, i64, f64, f64, f64)> = common
        .iter()
        .map(|(epoch, t, row)| {
            let mut peers: Vec<f64> = row
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, v)| *v as f64)
                .collect();
            let spread = peers.iter().copied().fold(f64::MIN, f64::max)
                - peers.iter().copied().fold(f64::MAX, f64::min);
            let mid = median(&mut peers).unwrap_or(0.0);
            let own = row[i] as f64;
            (*epoch, *t, own - mid, spread, own)
        })
        .collect();
    let longest = rows.len().min(cfg.max_epochs);
    // No window can grow more than the newest excess over the lowest in reach: most ranks
    // of most jobs stop here (this runs at every evaluation).
    let reach = &rows[rows.len() - longest..];
    let low = reach.iter().map(|r| r.2).fold(f64::MAX, f64::min);
    let last = reach[reach.len() - 1].2;
    if last <= 0.0 || last - low < cfg.min_growth_bytes as f64 {
        return None;
    }
    (cfg.min_epochs..=longest)
        .rev()
        .find_map(|n| window(&rows[rows.len() - n..], series.clone(), cfg))
}

fn window(
    rows: &[(u64, i64, f64, f64, f64)],
    series: TrendSeries,
    cfg: &DivergentConfig,
) -> Option<Divergence> {
    let n = rows.len();
    let excess: Vec<f64> = rows.iter().map(|r| r.2).collect();
    // Where it started: the median of the first three epochs, so one odd epoch at the
    // window's start does not make the growth.
    let start = median(&mut excess[..3.min(n)].to_vec())?;
    let growth = excess[n - 1] - start;
    // The peers' usual spread, and (below) the excess's own typical step: the noise a
    // divergence must stand out of. The cheap gates first: this runs at every evaluation.
    let spread = median(&mut rows.iter().map(|r| r.3).collect::<Vec<_>>())?;
    if growth < (cfg.spread_factor * spread).max(cfg.min_growth_bytes as f64) {
        return None;
    }
    let xs: Vec<f64> = rows.iter().map(|r| r.0 as f64).collect();
    let own: Vec<f64> = rows.iter().map(|r| r.4).collect();
    let slope = theil_sen(&xs, &excess)?;
    let own_slope = theil_sen(&xs, &own)?;
    let steps: Vec<f64> = excess.windows(2).map(|w| w[1] - w[0]).collect();
    // A leak's steps are all about its rate: the wobble is measured around the slope.
    let around = median(&mut steps.iter().map(|s| (s - slope).abs()).collect::<Vec<_>>())?;
    let noise = spread.max(around);
    // An epoch in which the gap grew by more than a quarter of the slope (allocator
    // rounding leaves flat epochs flat).
    let widened = steps
        .iter()
        .filter(|s| **s > 0.0 && **s >= 0.25 * slope)
        .count();
    let widening = widened as f64 / steps.len().max(1) as f64;
    let need = (cfg.spread_factor * noise).max(cfg.min_growth_bytes as f64);
    let gates = vec![
        Gate {
            name: GateName::ExcessGrowth,
            value: growth,
            threshold: need,
            passed: growth >= need,
        },
        Gate {
            name: GateName::Widening,
            value: widening,
            threshold: cfg.widening_share,
            passed: widening >= cfg.widening_share,
        },
    ];
    // The gap grows steadily (its slope carries the growth, not one jump), the rank's own
    // memory grows with it (not its peers shrinking), and it holds more than its peers.
    let steady = slope > 0.0 && slope * (n - 1) as f64 >= 0.5 * growth;
    let passed = gates.iter().all(|g| g.passed) && steady && own_slope > 0.0;
    // Since when: the first epoch whose excess stands a quarter of the needed growth
    // above the window's lowest start; from the window's first step on, it began before.
    let low = excess[..3.min(n)].iter().copied().fold(f64::MAX, f64::min);
    let (since, open) = match excess.iter().position(|x| x - low >= need / 4.0) {
        Some(i) if i > 1 => (rows[i].0, false),
        // Rising from the window's start: where the window starts, or earlier when the
        // window is as long as windows get (its onset is out of reach).
        _ => (rows[0].0, n >= cfg.max_epochs),
    };
    (passed && excess[n - 1] > 0.0).then(|| Divergence {
        since,
        open,
        series,
        epochs: rows.iter().map(|r| (r.0, r.1, r.2)).collect(),
        excess: excess[n - 1],
        slope,
        own_slope,
        own_now: own[n - 1],
        growth,
        noise,
        gates,
    })
}

fn finding(job: &JobInput, r: &RankInput, d: Divergence) -> Finding {
    let rank = r
        .rank
        .map_or_else(|| format!("PID {}", r.pid), |k| format!("rank {k}"));
    let since = if d.open {
        format!("{} or earlier", d.since)
    } else {
        d.since.to_string()
    };
    let last = d.epochs.last().map_or(0, |e| e.0);
    let what = match d.series {
        TrendSeries::Peak => "epoch peak",
        _ => "epoch floor",
    };
    let why = if r.rank == Some(0) {
        "work only rank 0 does keeps memory: logging, metrics or evaluation outputs kept as \
         tensors (`.item()` or `.detach().cpu()` them), or a growing list of them"
    } else {
        "work only this rank does keeps memory: its data shard's longer samples, or a \
         rank-specific branch that keeps tensors alive"
    };
    let forecast = r.ceiling.clone().and_then(|(ceiling, source)| {
        (d.own_slope > 0.0).then(|| {
            let steps = (ceiling as f64 - d.own_now).max(0.0) / d.own_slope;
            Forecast {
                ceiling,
                ceiling_source: source,
                current: d.own_now as u64,
                rate: d.own_slope,
                steps,
                ms: r.epoch_ms.map(|ms| (steps * ms) as i64),
                at_epoch: Some(last as f64 + steps),
            }
        })
    });
    let fate = match &forecast {
        Some(f) => format!(
            " The job ends when this rank runs out of memory: at this rate near epoch {:.0}{}.",
            f.at_epoch.unwrap_or(0.0),
            f.ms.map(|ms| format!(", {}", crate::fmt::rough_duration(ms)))
                .unwrap_or_default()
        ),
        None => " The job ends when this rank runs out of memory.".into(),
    };
    let spread = if d.noise < MIB_U64 as f64 {
        "while the ranks otherwise match within 1 MiB".to_string()
    } else {
        format!("beyond their usual spread of {}", human(d.noise as u64))
    };
    let message = format!(
        "{rank} of {} (PID {}) holds {} more than its peers at the {what} and the gap grows \
         {}/epoch since epoch {since}, {spread}: {why}.{fate}",
        job.job,
        r.pid,
        human(d.excess.max(0.0) as u64),
        human(d.slope.max(0.0) as u64),
    );
    let summary = fit_summary(format!(
        "{} {rank} +{} vs peers",
        who(Some(r.pid), r.gpu),
        compact(d.excess.max(0.0) as u64)
    ));
    Finding {
        key: AlertKey {
            kind: AlertKind::DivergentRank,
            pid: Some(r.pid),
            gpu: r.gpu,
        },
        severity: Severity::Warning,
        message,
        summary,
        evidence: Evidence {
            basis: Basis::Epochs,
            series: Some(d.series),
            unit: Some(StepUnit::Epoch),
            points: d
                .epochs
                .iter()
                .map(|(e, t, x)| Point {
                    x: *e as i64,
                    t: *t,
                    bytes: x.max(0.0) as u64,
                })
                .collect(),
            slope: Some(d.slope),
            p_value: None,
            gates: d.gates,
            forecast,
            values: Vec::new(),
            count: None,
        },
        epoch: Some(last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Epochs 0..n of a rank: `base` plus `per` times the epoch, a small ripple.
    fn series(n: u64, base: u64, per: impl Fn(u64) -> u64) -> Vec<EpochPoint> {
        (0..n)
            .map(|e| {
                let ripple = (e * 7919 % 5) * MIB / 4;
                let floor = base + per(e) + ripple;
                EpochPoint {
                    epoch: e,
                    t: 1_000 + e as i64 * 10_000,
                    floor,
                    peak: Some(floor + 2048 * MIB),
                    reserved: None,
                }
            })
            .collect()
    }

    fn job<'a>(ranks: &'a [Vec<EpochPoint>]) -> JobInput<'a> {
        JobInput {
            job: "ddp.py@959",
            ranks: ranks
                .iter()
                .enumerate()
                .map(|(i, e)| RankInput {
                    pid: 960 + i as u32,
                    gpu: 0,
                    rank: Some(i as u32),
                    epochs: e,
                    ceiling: Some((140 << 30, CeilingSource::CardNotHeld)),
                    epoch_ms: Some(10_000.0),
                })
                .collect(),
        }
    }

    fn cfg() -> DivergentConfig {
        DivergentConfig::default()
    }

    #[test]
    fn a_rank_that_keeps_growing_is_named_with_its_excess_and_since() {
        let ranks = [
            series(12, 900 * MIB, |_| 0),
            series(12, 900 * MIB, |e| e * 24 * MIB),
        ];
        let f = check(&job(&ranks), &cfg());
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.key.pid, Some(961));
        assert_eq!(f.key.kind, AlertKind::DivergentRank);
        assert!(
            f.message
                .starts_with("rank 1 of ddp.py@959 (PID 961) holds"),
            "{}",
            f.message
        );
        assert!(f.message.contains("since epoch 1"), "{}", f.message);
        assert!(f.message.contains("grows 24.0 MiB/epoch"), "{}", f.message);
        assert!(f.message.contains("The job ends"), "{}", f.message);
        assert!(f.summary.contains("rank 1"), "{}", f.summary);
        let fc = f.evidence.forecast.as_ref().expect("forecast");
        assert!(fc.steps > 1000.0, "{fc:?}");
    }

    #[test]
    fn rank_zero_is_told_what_rank_zero_usually_keeps() {
        let ranks = [
            series(12, 1200 * MIB, |e| e * 40 * MIB),
            series(12, 900 * MIB, |_| 0),
            series(12, 900 * MIB, |_| MIB),
        ];
        let f = check(&job(&ranks), &cfg());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].key.pid, Some(960));
        assert!(f[0].message.contains("logging"), "{}", f[0].message);
    }

    #[test]
    fn a_constant_extra_on_rank_zero_is_silent() {
        let ranks = [
            series(30, 2400 * MIB, |_| 0),
            series(30, 900 * MIB, |_| 0),
            series(30, 900 * MIB, |_| 0),
        ];
        assert!(check(&job(&ranks), &cfg()).is_empty());
    }

    #[test]
    fn every_rank_growing_together_is_the_growth_rule_not_this_one() {
        let ranks = [
            series(20, 900 * MIB, |e| e * 24 * MIB),
            series(20, 900 * MIB, |e| e * 24 * MIB),
        ];
        assert!(check(&job(&ranks), &cfg()).is_empty());
    }

    #[test]
    fn uneven_last_batches_and_a_one_off_step_are_silent() {
        // Rank 1's last batch is smaller every epoch: its peak sits lower, by the same
        // amount, and one epoch it ran a shorter one still.
        let mut r1 = series(20, 900 * MIB, |_| 0);
        for e in &mut r1 {
            e.peak = e.peak.map(|p| p - 300 * MIB);
        }
        r1[11].peak = r1[11].peak.map(|p| p + 500 * MIB);
        // Rank 2 steps up once (a longer shard bucket) and stays there.
        let r2 = series(20, 900 * MIB, |e| if e >= 8 { 200 * MIB } else { 0 });
        let ranks = [series(20, 900 * MIB, |_| 0), r1, r2];
        assert!(check(&job(&ranks), &cfg()).is_empty());
    }

    #[test]
    fn too_few_epochs_or_one_rank_say_nothing_yet() {
        let ranks = [
            series(5, 900 * MIB, |_| 0),
            series(5, 900 * MIB, |e| e * 100 * MIB),
        ];
        assert!(check(&job(&ranks), &cfg()).is_empty());
        let one = [series(20, 900 * MIB, |e| e * 100 * MIB)];
        assert!(check(&job(&one), &cfg()).is_empty());
    }

    #[test]
    fn a_divergence_older_than_the_window_says_its_start_is_out_of_reach() {
        let ranks = [
            series(40, 900 * MIB, |_| 0),
            series(40, 900 * MIB, |e| e * 24 * MIB),
        ];
        let f = check(&job(&ranks), &cfg());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].message.contains("since epoch 20 or earlier"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_divergence_that_starts_late_is_found_from_its_start() {
        let ranks = [
            series(24, 900 * MIB, |_| 0),
            series(24, 900 * MIB, |e| e.saturating_sub(14) * 30 * MIB),
        ];
        let f = check(&job(&ranks), &cfg());
        assert_eq!(f.len(), 1, "{f:?}");
        // The window that passes reaches back to about where it began.
        let since = f[0].evidence.points[0].x;
        assert!((10..=16).contains(&since), "{since}: {}", f[0].message);
    }
}
