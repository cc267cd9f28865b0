//! The rate the GROWTH sort ranks processes by: the best series a
//! process has, never its start-up ramp. NVML's usage over the last minute ranked a clean
//! run whose batch grew first and a leak inside the allocator's cache last (its NVML
//! usage does not move while the cache absorbs it). In order:
//!
//! 1. the companion's floor at each epoch end (warm-up epoch 0 left out): Theil–Sen slope
//!    per epoch over the last 20, times epochs per minute (median epoch duration);
//! 2. the interposer's live bytes: the minimum of each 10-second window after its warm-up;
//! 3. NVML's per-process usage: the minimum of each 20-second window after 40 s.
//!
//! The windows and warm-ups are the growth rule's (`GrowthConfig`).

use crate::model::alerts::config::GrowthConfig;
use crate::model::alerts::from_state::fixed_windows;
use crate::model::alerts::inputs::WindowPoint;
use crate::model::alerts::stats::{median, theil_sen};
use crate::model::state::State;

/// Points a rate is taken over, at most.
const KEEP: usize = 20;

/// Bytes per minute, `None` when the process has too few points yet (under three).
pub fn per_minute(state: &State, pid: u32, gpu: u32, cfg: &GrowthConfig) -> Option<f64> {
    let now = state.now;
    if let Some(d) = state.live_alloc_on(pid, gpu) {
        let pts: Vec<(f64, f64, i64)> = d
            .epochs
            .iter()
            .filter(|e| e.epoch >= 1)
            .filter_map(|e| Some((e.epoch as f64, e.floor? as f64, e.t?)))
            .collect();
        let pts = &pts[pts.len().saturating_sub(KEEP)..];
        if pts.len() >= 3 {
            let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
            let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
            let mut ms: Vec<f64> = pts
                .windows(2)
                .filter(|w| w[1].0 > w[0].0)
                .map(|w| (w[1].2 - w[0].2) as f64 / (w[1].0 - w[0].0))
                .filter(|m| *m > 0.0)
                .collect();
            let per_epoch = theil_sen(&xs, &ys)?;
            return Some(per_epoch * 60_000.0 / median(&mut ms)?);
        }
        if d.interposer {
            let first = state.companions.get(pid).map_or(now, |p| p.first_seen);
            let w = fixed_windows(
                &d.allocated,
                first.saturating_add(cfg.exact_window_warmup_ms),
                now,
                cfg.exact_window_ms,
                KEEP,
            );
            if let Some(r) = window_rate(&w, cfg.exact_window_ms) {
                return Some(r);
            }
        }
    }
    let p = state.procs.get(&pid)?;
    let pg = p.gpus.get(&gpu)?;
    let w = fixed_windows(
        &pg.used,
        p.first_seen.saturating_add(cfg.nvml_window_warmup_ms),
        now,
        cfg.nvml_window_ms,
        KEEP,
    );
    window_rate(&w, cfg.nvml_window_ms)
}

fn window_rate(w: &[WindowPoint], width_ms: i64) -> Option<f64> {
    if w.len() < 3 || width_ms <= 0 {
        return None;
    }
    let xs: Vec<f64> = w.iter().map(|p| p.index as f64).collect();
    let ys: Vec<f64> = w.iter().map(|p| p.min as f64).collect();
    Some(theil_sen(&xs, &ys)? * 60_000.0 / width_ms as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::series::Series;

    #[test]
    fn window_rates_are_per_minute_and_need_three_windows() {
        let mut s = Series::default();
        for i in 0..120 {
            // 1 MiB per second, with a start-up ramp of 500 MiB in the first 10 s
            let ramp = if i < 10 { 0.0 } else { 500.0 };
            s.push(i * 1000, Some((ramp + i as f64) * 1048576.0));
        }
        let w = fixed_windows(&s, 40_000, 120_000, 20_000, KEEP);
        let r = window_rate(&w, 20_000).expect("enough windows");
        assert!((r / 1048576.0 - 60.0).abs() < 1.0, "{r}");
        assert!(window_rate(&w[..2], 20_000).is_none());
    }
}
