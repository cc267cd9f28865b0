//! The trend test behind the growth rule: a robust slope (Theil–Sen) and a one-sided
//! Mann–Kendall test on quantised bytes, with effect-size gates, searched over every
//! trailing window and confirmed on the newest endings. `growth` turns a passing window
//! into a finding with a forecast.

use crate::fmt::MIB_U64;
use crate::model::time::Ts;

use super::config::GrowthConfig;
use super::inputs::{Envelope, EpochPoint};
use super::memo;
use super::stats::{mann_kendall_up, median, quantise_mib, residual_noise, theil_sen};
use super::{Gate, GateName, Point};

/// Rounded to 4 significant digits (whole numbers above 10^4 stay whole).
fn sig4(v: f64) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return if v.is_finite() { v } else { 0.0 };
    }
    if v.abs() >= 1e4 {
        return v.round();
    }
    let mag = 10f64.powi(3 - libm::log10(v.abs()).floor() as i32);
    (v * mag).round() / mag
}

/// One series to test: x (epoch or window index), time, bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub x: Vec<f64>,
    pub t: Vec<Ts>,
    pub y: Vec<u64>,
    /// The lowest and highest value of the series' points before these ones, within the
    /// envelope (`GrowthConfig::envelope_epochs`): the range a new trend must leave, kept
    /// as two numbers so that hundreds of old epochs need not travel with the trace.
    pub older: Option<(u64, u64)>,
}

impl Trace {
    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    fn prefix(&self, len: usize) -> Trace {
        Trace {
            x: self.x[..len].to_vec(),
            t: self.t[..len].to_vec(),
            y: self.y[..len].to_vec(),
            older: self.older,
        }
    }

    fn suffix(&self, k: usize) -> Trace {
        let s = self.len() - k;
        Trace {
            x: self.x[s..].to_vec(),
            t: self.t[s..].to_vec(),
            y: self.y[s..].to_vec(),
            older: None,
        }
    }

    pub fn points(&self) -> Vec<Point> {
        (0..self.len())
            .map(|i| Point {
                x: self.x[i] as i64,
                t: self.t[i],
                bytes: self.y[i],
            })
            .collect()
    }
}

/// A window that passed every gate of the trend test.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendTest {
    pub window: Trace,
    /// Theil–Sen slope, bytes per x unit.
    pub slope: f64,
    pub p: f64,
    /// Every gate with the value it saw (all passed), for the evidence.
    pub gates: Vec<Gate>,
}

fn quantised(ys: &[u64]) -> Vec<f64> {
    ys.iter()
        .map(|&b| quantise_mib(b) as f64 * MIB_U64 as f64)
        .collect()
}

/// Tests one window (all of `w`) against every gate; `None` when one fails. The cheap
/// Mann–Kendall gate goes first and stops the rest: the window search tries every length
/// and most windows of a clean run fail it.
/// `history_noise`: noise of the longer history before and including the window.
fn window_trend(
    w: &Trace,
    history_noise: &dyn Fn() -> f64,
    capacity: u64,
    cfg: &GrowthConfig,
) -> Option<TrendTest> {
    let n = w.len();
    if n < 3 {
        return None;
    }
    let q: Vec<i64> = w.y.iter().map(|&b| quantise_mib(b)).collect();
    let mk = mann_kendall_up(&q);
    if mk.p_up >= cfg.alpha {
        return None;
    }
    let yq: Vec<f64> = q.iter().map(|&v| v as f64 * MIB_U64 as f64).collect();
    let slope = theil_sen(&w.x, &yq)?;
    let span = w.x[n - 1] - w.x[0];
    let growth = slope * span;
    let noise = residual_noise(&w.x, &yq, slope).max(history_noise());
    let half = n.div_ceil(2);
    let first = theil_sen(&w.x[..half], &yq[..half]).unwrap_or(0.0);
    let second = theil_sen(&w.x[n - half..], &yq[n - half..]).unwrap_or(0.0);
    // Standard error of the growth b·(n−1) under pure noise of scale σ (least-squares
    // slope SE times n−1): growth must exceed it `min_signal_to_noise` times over, so a
    // short window needs a clearer trend than a long one.
    let nf = n as f64;
    let se_growth = noise * (12.0 * (nf - 1.0) / (nf * (nf + 1.0))).sqrt();
    let noise_floor = cfg.min_signal_to_noise * se_growth;
    // Growth left once the two largest single jumps are taken out: a step change (even
    // with a spike next to it) leaves nothing, a leak loses two epochs' worth.
    let without_jumps = {
        let mut ups: Vec<(f64, usize)> = (1..n)
            .map(|i| (yq[i] - yq[i - 1], i))
            .filter(|(d, _)| *d > 0.0)
            .collect();
        ups.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut flat = yq.clone();
        for &(d, at) in ups.iter().take(2) {
            for v in &mut flat[at..] {
                *v -= d;
            }
        }
        theil_sen(&w.x, &flat).unwrap_or(0.0)
    };
    let min_slope = if cfg.exact_gates {
        (cfg.min_slope_bytes as f64).max(cfg.exact_noise_slope * noise)
    } else {
        cfg.min_slope_bytes as f64
    };
    let min_growth = (cfg.min_growth_bytes as f64).max(cfg.min_growth_frac * capacity as f64);
    // Evidence is stored rounded (4 significant digits, whole bytes) so recordings read
    // cleanly and survive a JSON round trip unchanged; decisions use the exact values.
    let gate = |name: GateName, value: f64, threshold: f64, passed: bool| Gate {
        name,
        value: sig4(value),
        threshold: sig4(threshold),
        passed,
    };
    let gates = vec![
        gate(
            GateName::MannKendallP,
            mk.p_up,
            cfg.alpha,
            mk.p_up < cfg.alpha,
        ),
        gate(GateName::Slope, slope, min_slope, slope >= min_slope),
        gate(GateName::Growth, growth, min_growth, growth >= min_growth),
        gate(
            GateName::GrowthVsNoise,
            growth,
            noise_floor,
            growth > noise_floor,
        ),
        gate(
            GateName::Sustained,
            first.min(second),
            cfg.sustained_frac * min_slope,
            first.min(second) >= cfg.sustained_frac * min_slope,
        ),
        gate(
            GateName::NotAJump,
            without_jumps,
            cfg.sustained_frac * min_slope,
            without_jumps >= cfg.sustained_frac * min_slope,
        ),
    ];
    let mut gates = gates;
    if cfg.exact_gates {
        // Per-x steps (epochs or windows may skip): their median carries a leak's rate.
        let mut steps: Vec<f64> = (1..n)
            .filter_map(|i| {
                let dx = w.x[i] - w.x[i - 1];
                (dx > 0.0).then(|| (yq[i] - yq[i - 1]) / dx)
            })
            .collect();
        // Without the two largest, as for `not a jump`: a warm-up or a step change is one
        // or two of them; what is left of a leak still steps at its rate, of jitter not.
        steps.sort_by(|a, b| a.total_cmp(b));
        if steps.len() >= 4 {
            steps.truncate(steps.len() - 2);
        }
        let med = median(&mut steps).unwrap_or(0.0);
        let need = cfg.sustained_frac * slope;
        gates.push(gate(
            GateName::MedianStep,
            med,
            need,
            med >= need && med > 0.0,
        ));
    }
    if !gates.iter().all(|g| g.passed) {
        return None;
    }
    Some(TrendTest {
        window: w.clone(),
        slope: slope.round(),
        p: sig4(mk.p_up),
        gates,
    })
}

/// Try every trailing window from the longest to the shortest allowed; the longest
/// passing one wins (best slope estimate). A leak that starts after a flat stretch is
/// found by the short windows, without waiting for the flat points to slide out.
/// `sticky`: the alert is active, so the envelope need only be topped, not cleared by a
/// margin (a long leak's own earlier rise widens the range it is measured against).
pub fn detect(trace: &Trace, capacity: u64, cfg: &GrowthConfig, sticky: bool) -> Option<TrendTest> {
    let max = cfg.max_window.min(trace.len());
    let min = cfg.min_window.max(3);
    // Noise from up to twice the longest window: a lucky, nearly sorted stretch of noise
    // looks clean inside its own window but not against the longer history.
    // Computed only once some window passes the cheap trend test (rare on clean runs).
    let history_noise = std::cell::OnceCell::new();
    let noise = || {
        *history_noise.get_or_init(|| {
            let hist = trace.suffix(trace.len().min(2 * cfg.max_window.max(cfg.min_window)));
            let hy = quantised(&hist.y);
            theil_sen(&hist.x, &hy).map_or(0.0, |b| residual_noise(&hist.x, &hy, b))
        })
    };
    (min..=max).rev().find_map(|k| {
        let mut test = window_trend(&trace.suffix(k), &noise, capacity, cfg)?;
        test.gates.push(new_high(trace, k, cfg, !sticky)?);
        Some(test)
    })
}

/// The envelope gate: the newest level of the window (median of its last three points)
/// must top every point of the `envelope_epochs` before the window, by a quarter of their
/// range. `None` when it does
/// not; with too little history to have a range (the run's first epochs), it passes.
fn new_high(trace: &Trace, k: usize, cfg: &GrowthConfig, margin: bool) -> Option<Gate> {
    let start = trace.len() - k;
    let before = &trace.y[start.saturating_sub(cfg.envelope_epochs)..start];
    let mut last: Vec<f64> = trace.y[trace.len().saturating_sub(3)..]
        .iter()
        .map(|&v| v as f64)
        .collect();
    let level = median(&mut last).unwrap_or(0.0);
    // The range before the window: its own older points and the summary of those before
    // the trace.
    let range = before
        .iter()
        .map(|&v| (v, v))
        .chain(trace.older)
        .reduce(|(l0, h0), (l1, h1)| (l0.min(l1), h0.max(h1)));
    // Above the top by a quarter of the range: a wandering series sets a record now and
    // then by a little, a leak leaves the range for good.
    let share = if margin { 0.25 } else { 0.0 };
    let top = range.map(|(l, h)| h as f64 + share * (h - l) as f64);
    let short = before.len() < cfg.min_window && trace.older.is_none();
    let passed = cfg.envelope_epochs == 0 || short || top.is_none_or(|m| level > m);
    passed.then(|| Gate {
        name: GateName::NewHigh,
        value: sig4(level),
        threshold: sig4(top.unwrap_or(0.0)),
        passed,
    })
}

/// `detect` on the newest `cfg.confirm` endings of the series. A new alert needs all of
/// them to pass (one lucky point cannot raise it); an active one (`sticky`) stays while
/// any passes, so a noisy leak does not flap.
pub fn detect_confirmed(
    trace: &Trace,
    capacity: u64,
    cfg: &GrowthConfig,
    sticky: bool,
) -> Option<TrendTest> {
    detect_confirmed_memo(trace, capacity, cfg, sticky)
}

fn detect_confirmed_uncached(
    trace: &Trace,
    capacity: u64,
    cfg: &GrowthConfig,
    sticky: bool,
) -> Option<TrendTest> {
    let endings = cfg.confirm.max(1);
    if trace.len() < cfg.min_window + endings - 1 {
        return None;
    }
    let mut results =
        (0..endings).map(|e| detect(&trace.prefix(trace.len() - e), capacity, cfg, sticky));
    if sticky {
        results.find_map(|r| r)
    } else {
        let newest = results.next().flatten()?;
        results.all(|r| r.is_some()).then_some(newest)
    }
}

/// Clean epoch points: warm-up and pre-baseline epochs dropped, sorted, one per epoch.
pub fn usable_epochs(
    points: &[EpochPoint],
    baseline_from: Option<Ts>,
    cfg: &GrowthConfig,
) -> Vec<EpochPoint> {
    let mut v: Vec<EpochPoint> = Vec::with_capacity(points.len());
    v.extend(
        points
            .iter()
            .filter(|p| p.epoch >= cfg.warmup_epochs && baseline_from.is_none_or(|b| p.t >= b)),
    );
    v.sort_by_key(|p| p.epoch);
    // A repeated epoch number (a restarted marker) keeps its latest report.
    v.reverse();
    v.dedup_by_key(|p| p.epoch);
    v.reverse();
    v
}

fn trace_of(
    points: &[EpochPoint],
    older: Option<(u64, u64)>,
    f: impl Fn(&EpochPoint) -> Option<u64>,
) -> Trace {
    let n = points.len();
    let mut tr = Trace {
        x: Vec::with_capacity(n),
        t: Vec::with_capacity(n),
        y: Vec::with_capacity(n),
        older,
    };
    for p in points {
        if let Some(v) = f(p) {
            tr.x.push(p.epoch as f64);
            tr.t.push(p.t);
            tr.y.push(v);
        }
    }
    tr
}

/// The growth rule's trend tests on per-epoch points, and the floor's newest usable point.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochTrends {
    pub last: Option<EpochPoint>,
    /// The allocated floor at epoch ends (judged with the exact gates when `exact`).
    pub floor: Option<TrendTest>,
    pub peak: Option<TrendTest>,
    pub reserved: Option<TrendTest>,
}

/// `floor`, `peak` (sticky while a growth alert is active) and `reserved` (sticky while a
/// cache-growth one is) of `points`, remembered by every input: the engine asks every
/// second, the points change once an epoch.
pub fn epoch_trends(
    points: &[EpochPoint],
    baseline_from: Option<Ts>,
    capacity: u64,
    exact: bool,
    (growth_active, cache_active): (bool, bool),
    envelope: &Envelope,
    cfg: &GrowthConfig,
) -> std::rc::Rc<EpochTrends> {
    let flags = (exact, growth_active, cache_active);
    let mut h = memo::mix(capacity, baseline_from.map_or(0, |b| b as u64 ^ 1 << 63));
    h = memo::mix(
        h,
        u64::from(exact) | u64::from(growth_active) << 1 | u64::from(cache_active) << 2,
    );
    // The newest points and the count tell series apart; the whole key is compared on a hit.
    h = memo::mix(h, points.len() as u64);
    h = memo::mix(h, envelope.floor.map_or(0, |(l, h)| l ^ h.rotate_left(17)));
    for p in points.iter().rev().take(2).chain(points.first()) {
        h = memo::mix(memo::mix(memo::mix(h, p.epoch), p.t as u64), p.floor);
        h = memo::mix(
            memo::mix(h, p.peak.map_or(1, |v| v << 1)),
            p.reserved.map_or(1, |v| v << 1),
        );
    }
    let same = |k: &EpochKey| {
        k.capacity == capacity
            && k.flags == flags
            && k.baseline_from == baseline_from
            && k.points == points
            && k.envelope == *envelope
            && k.cfg == *cfg
    };
    EPOCH_TRENDS
        .with(|m| m.borrow_mut().get(h, same))
        .unwrap_or_else(|| {
            let exact_cfg = cfg.exact();
            let floor_cfg = if exact { &exact_cfg } else { cfg };
            let pts = usable_epochs(points, baseline_from, cfg);
            let floor_pts = usable_epochs(points, baseline_from, floor_cfg);
            let floor = trace_of(&floor_pts, envelope.floor, |p| Some(p.floor));
            let peak = trace_of(&pts, envelope.peak, |p| p.peak);
            let reserved = trace_of(&pts, envelope.reserved, |p| p.reserved);
            let trends = std::rc::Rc::new(EpochTrends {
                last: floor_pts.last().copied(),
                floor: detect_confirmed(&floor, capacity, floor_cfg, growth_active),
                peak: detect_confirmed(&peak, capacity, cfg, growth_active),
                reserved: detect_confirmed(&reserved, capacity, cfg, cache_active),
            });
            let key = EpochKey {
                points: points.to_vec(),
                envelope: *envelope,
                baseline_from,
                capacity,
                flags,
                cfg: cfg.clone(),
            };
            EPOCH_TRENDS.with(|m| m.borrow_mut().put(h, key, trends.clone()));
            trends
        })
}

struct EpochKey {
    points: Vec<EpochPoint>,
    envelope: Envelope,
    baseline_from: Option<Ts>,
    capacity: u64,
    flags: (bool, bool, bool),
    cfg: GrowthConfig,
}

struct TraceKey {
    trace: Trace,
    capacity: u64,
    cfg: GrowthConfig,
    sticky: bool,
}

thread_local! {
    static EPOCH_TRENDS: std::cell::RefCell<memo::Memo<EpochKey, std::rc::Rc<EpochTrends>>> =
        std::cell::RefCell::new(memo::Memo::default());
    static CONFIRMED: std::cell::RefCell<memo::Memo<TraceKey, Option<TrendTest>>> =
        std::cell::RefCell::new(memo::Memo::default());
}

/// `detect_confirmed` remembered by its inputs (the windowed series: their points change
/// once a window completes).
fn detect_confirmed_memo(
    trace: &Trace,
    capacity: u64,
    cfg: &GrowthConfig,
    sticky: bool,
) -> Option<TrendTest> {
    let mut h = memo::mix(capacity, u64::from(sticky));
    for ((x, t), y) in trace.x.iter().zip(&trace.t).zip(&trace.y) {
        h = memo::mix(memo::mix(memo::mix(h, x.to_bits()), *t as u64), *y);
    }
    h = memo::mix(h, trace.len() as u64);
    h = memo::mix(h, trace.older.map_or(0, |(l, h)| l ^ h.rotate_left(17)));
    let same = |k: &TraceKey| {
        k.capacity == capacity && k.sticky == sticky && k.trace == *trace && k.cfg == *cfg
    };
    CONFIRMED
        .with(|m| m.borrow_mut().get(h, same))
        .unwrap_or_else(|| {
            let result = detect_confirmed_uncached(trace, capacity, cfg, sticky);
            let key = TraceKey {
                trace: trace.clone(),
                capacity,
                cfg: cfg.clone(),
                sticky,
            };
            CONFIRMED.with(|m| m.borrow_mut().put(h, key, result.clone()));
            result
        })
}

/// The rate a forecast extrapolates: Theil–Sen over the newest `k` points of the window.
/// The longest passing window is the best evidence that there is a trend, but when the
/// leak began inside it, its older flat (or warm-up) points pull the slope below the rate
/// the run grows at now, which is what "at the current rate" promises. (A flat-then-linear
/// fit was tried and lost: a warm-up ramp before the flat part fools it, and on 12 MiB per
/// epoch with 4 MiB jitter its 5–95 % range of rates is −29…+40 %, against −12…+15 % here.)
pub fn current_rate(w: &Trace, k: usize, window_slope: f64) -> f64 {
    if w.len() <= k || k < 3 {
        return window_slope;
    }
    let tail = w.suffix(k);
    theil_sen(&tail.x, &quantised(&tail.y))
        .filter(|b| *b > 0.0)
        .unwrap_or(window_slope)
}
