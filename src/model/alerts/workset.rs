//! The working set: what an epoch needs above its floor (the epoch's peak less its
//! floor). A curriculum, growing sequence lengths or a cache filled during the step make
//! it grow while the floor stays put, and it is the step's peak, not the floor, that meets
//! the allocator's limit. A working set that scales with the batch or the sequence grows
//! by a share of itself per epoch; one that adds a fixed amount grows linearly: the model
//! that fits the window better is the one extrapolated.

use super::config::GrowthConfig;
use super::inputs::EpochPoint;
use super::stats::{mann_kendall_up, median, quantise_mib, theil_sen};

/// The linear fit is taken only when its residual is this many times smaller.
const LINEAR_CLEARLY: f64 = 2.0;

/// How the working set grows, fitted on the newest epochs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorksetTrend {
    /// By a share of itself per epoch (`rate` is that share), or by `rate` bytes per epoch.
    pub geometric: bool,
    pub rate: f64,
    /// The fitted working set at the newest epoch, bytes.
    pub now: f64,
    pub first_x: f64,
    pub last_x: f64,
    pub p: f64,
}

impl WorksetTrend {
    /// The working set `k` epochs after the newest.
    pub fn at(&self, k: f64) -> f64 {
        if self.geometric {
            self.now * libm::pow(1.0 + self.rate, k)
        } else {
            self.now + self.rate * k
        }
    }

    /// Bytes per epoch it grows by now.
    pub fn bytes_per_epoch(&self) -> f64 {
        if self.geometric {
            self.now * self.rate
        } else {
            self.rate
        }
    }
}

/// Median absolute residual of `ys` against `f(x)`.
fn residual(xs: &[f64], ys: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut r: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| (y - f(*x)).abs()).collect();
    median(&mut r).unwrap_or(f64::INFINITY)
}

/// The working set's trend over the newest `max_window` epochs with a peak (clean
/// points: warm-up and pre-baseline already dropped): `None` unless it rises
/// (Mann–Kendall at `alpha`) by at least `min_slope_bytes` per epoch now.
pub fn trend(points: &[EpochPoint], cfg: &GrowthConfig) -> Option<WorksetTrend> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            let ws = p.peak?.checked_sub(p.floor)?;
            (ws > 0).then_some((p.epoch as f64, ws as f64))
        })
        .collect();
    let pts = &pts[pts.len().saturating_sub(cfg.max_window)..];
    if pts.len() < cfg.min_window.max(3) {
        return None;
    }
    let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let q: Vec<i64> = ys.iter().map(|&y| quantise_mib(y as u64)).collect();
    let mk = mann_kendall_up(&q);
    if mk.p_up >= cfg.alpha {
        return None;
    }
    let intercept = |ys: &[f64], b: f64| {
        let mut a: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| y - b * x).collect();
        median(&mut a)
    };
    let b = theil_sen(&xs, &ys)?;
    let a = intercept(&ys, b)?;
    let ln: Vec<f64> = ys.iter().map(|&y| libm::log(y)).collect();
    let g = theil_sen(&xs, &ln)?;
    let la = intercept(&ln, g)?;
    let lin_res = residual(&xs, &ys, |x| a + b * x);
    let geo_res = residual(&xs, &ys, |x| libm::exp(la + g * x));
    let last_x = *xs.last()?;
    // Six or eight noisy points tell the two apart only when one fits clearly better. A
    // tie goes to the share per epoch: a working set that scales with a curriculum grows
    // that way, and taking a linear fit for it says the OOM is several times farther
    // than it is, while the reverse errs early, by at most a third or so at this range.
    let geometric = g > 0.0 && lin_res * LINEAR_CLEARLY >= geo_res;
    let t = if geometric {
        WorksetTrend {
            geometric,
            rate: libm::expm1(g),
            now: libm::exp(la + g * last_x),
            first_x: xs[0],
            last_x,
            p: mk.p_up,
        }
    } else {
        WorksetTrend {
            geometric,
            rate: b,
            now: a + b * last_x,
            first_x: xs[0],
            last_x,
            p: mk.p_up,
        }
    };
    // Spread over the epochs, not one step: without its two largest, the median rise per
    // epoch still carries half the rate (a batch-size change that doubled the working set
    // once is not a trend to extrapolate).
    let mut steps: Vec<f64> = (1..ys.len())
        .filter_map(|i| {
            let dx = xs[i] - xs[i - 1];
            (dx > 0.0).then(|| (ys[i] - ys[i - 1]) / dx)
        })
        .collect();
    steps.sort_by(|a, b| a.total_cmp(b));
    steps.truncate(steps.len().saturating_sub(2));
    let spread = median(&mut steps).unwrap_or(0.0);
    let rate = t.bytes_per_epoch();
    (rate >= cfg.min_slope_bytes as f64 && spread >= cfg.sustained_frac * rate).then_some(t)
}

/// Epochs until `floor + floor_rate·k + working set(k)` reaches `ceiling`: 0 when it
/// already does, `None` when it never will.
pub fn epochs_to(ws: &WorksetTrend, floor: f64, floor_rate: f64, ceiling: f64) -> Option<f64> {
    let need = |k: f64| floor + floor_rate.max(0.0) * k + ws.at(k) - ceiling;
    if need(0.0) >= 0.0 {
        return Some(0.0);
    }
    // Both parts are non-decreasing: find a k past the crossing, then bisect.
    let mut hi = 1.0;
    while need(hi) < 0.0 {
        hi *= 2.0;
        if hi > 1e7 {
            return None;
        }
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if need(mid) >= 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::MIB_U64;
    const M: f64 = MIB_U64 as f64;

    fn points(ws: impl Fn(u64) -> f64, n: u64) -> Vec<EpochPoint> {
        (0..n)
            .map(|e| EpochPoint {
                epoch: e,
                t: e as i64 * 1000,
                floor: 600 * MIB_U64,
                peak: Some(600 * MIB_U64 + ws(e) as u64),
                reserved: None,
            })
            .collect()
    }

    #[test]
    fn a_share_per_epoch_is_fitted_as_such_and_forecast_where_it_crosses() {
        let pts = points(|e| 300.0 * M * 1.04f64.powi(e as i32), 9);
        let t = trend(&pts, &GrowthConfig::default()).expect("growing");
        assert!(t.geometric);
        assert!((t.rate - 0.04).abs() < 0.002, "{}", t.rate);
        // 600 MiB floor + 300·1.04^e reaches 4 GiB at e = ln(3496/300)/ln(1.04) ≈ 62.6
        let k = epochs_to(&t, 600.0 * M, 0.0, 4096.0 * M).expect("crosses");
        assert!((t.last_x + k - 62.6).abs() < 0.5, "{}", t.last_x + k);
    }

    #[test]
    fn a_fixed_amount_per_epoch_is_linear() {
        let pts = points(|e| (400 + 28 * e) as f64 * M, 9);
        let t = trend(&pts, &GrowthConfig::default()).expect("growing");
        assert!(!t.geometric);
        assert!((t.rate - 28.0 * M).abs() < 1.0);
        let k = epochs_to(&t, 900.0 * M, 0.0, 3072.0 * M).expect("crosses");
        // 900 + 400 + 28e = 3072 at e ≈ 63.3
        assert!((t.last_x + k - 63.3).abs() < 0.5, "{}", t.last_x + k);
    }

    #[test]
    fn a_flat_or_noisy_working_set_has_no_trend() {
        let flat = points(|e| (500 + (e * 7919) % 13) as f64 * M, 20);
        assert_eq!(trend(&flat, &GrowthConfig::default()), None);
        let tiny = points(|e| (500.0 + e as f64) * M, 20);
        assert_eq!(
            trend(&tiny, &GrowthConfig::default()),
            None,
            "1 MiB per epoch"
        );
    }

    #[test]
    fn one_step_up_is_not_a_trend() {
        let step = points(|e| if e < 4 { 2.0 * M } else { 344.0 * M }, 12);
        assert_eq!(trend(&step, &GrowthConfig::default()), None);
    }

    #[test]
    fn a_rising_floor_brings_the_crossing_forward() {
        let t = WorksetTrend {
            geometric: false,
            rate: 10.0 * M,
            now: 100.0 * M,
            first_x: 0.0,
            last_x: 10.0,
            p: 0.001,
        };
        let alone = epochs_to(&t, 0.0, 0.0, 1100.0 * M).unwrap();
        let with_floor = epochs_to(&t, 0.0, 10.0 * M, 1100.0 * M).unwrap();
        assert!((alone - 100.0).abs() < 0.01 && (with_floor - 50.0).abs() < 0.01);
        assert_eq!(epochs_to(&t, 2000.0 * M, 0.0, 1100.0 * M), Some(0.0));
    }
}
