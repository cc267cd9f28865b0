//! Alert thresholds. Every field has a documented default (docs/alerts.md) and can be
//! overridden from a JSON/TOML-like config through serde; missing fields keep defaults.

use serde::{Deserialize, Serialize};

use crate::fmt::MIB_U64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct AlertConfig {
    pub growth: GrowthConfig,
    pub fragmentation: FragConfig,
    pub grab_all: GrabAllConfig,
    pub headroom: HeadroomConfig,
    pub divergent_rank: super::divergent_rank::DivergentConfig,
    pub engine: EngineConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrowthConfig {
    /// Epochs below this number are warm-up (optimizer state, autotuning caches) and skipped.
    pub warmup_epochs: u64,
    /// Fewest points a trend is judged on.
    pub min_window: usize,
    /// Most points a trend is judged on; every trailing window from min to max is tried,
    /// so a leak that starts mid-run is seen without waiting for old flat points to leave.
    pub max_window: usize,
    /// Epochs before a trend window that it must rise above: the newest level of a window
    /// must top every point of this many epochs before it. A trendless floor (a rotating
    /// cache) drifts up and down inside its own range, and every epoch is a new look for a
    /// trend, so over hundreds of epochs some stretch always passes the trend gates; a leak
    /// leaves the range within a few epochs. 0: off.
    pub envelope_epochs: usize,
    /// One-sided Mann–Kendall significance level.
    pub alpha: f64,
    /// Theil–Sen slope must reach this many bytes per epoch (or per window).
    pub min_slope_bytes: u64,
    /// Growth over the window b·(n−1) must reach max(min_growth_bytes, min_growth_frac·capacity).
    pub min_growth_bytes: u64,
    pub min_growth_frac: f64,
    /// Growth over the window must exceed this many standard errors of growth under
    /// pure noise, the noise being a robust scale (MAD of residuals around the Theil–Sen
    /// line) of the window and of up to twice the longest window before it.
    pub min_signal_to_noise: f64,
    /// Each half of the window, and the window with its two largest single jumps taken out,
    /// must grow at least this share of `min_slope_bytes` per epoch: a step change or a
    /// warm-up ramp that flattened out is not a leak.
    pub sustained_frac: f64,
    /// The rule must pass on this many consecutive endings of the series (the newest
    /// point and the ones before), so one lucky point cannot raise it.
    pub confirm: usize,
    /// Critical when the forecast is under this many epochs (or windows).
    pub critical_epochs: f64,
    /// Fallback without epoch markers: width of a fixed time window (its minimum is the point).
    pub window_ms: i64,
    /// Fallback: windows that start within this long of the process's first sighting are warm-up.
    pub window_warmup_ms: i64,
    /// The same for the native interposer's live bytes: exact (every allocation counted, no
    /// cache), so a window need only span a few steps (a leak is flagged within 2 minutes).
    pub exact_window_ms: i64,
    pub exact_window_warmup_ms: i64,
    /// The same for NVML usage without a companion: it moves in the allocator's segment
    /// steps, so windows are longer (a leak is flagged within 10 minutes of its onset).
    pub nvml_window_ms: i64,
    pub nvml_window_warmup_ms: i64,
    /// Exact series (the allocator's floor after gc, the interposer's live bytes) have no
    /// cache and no sampling in them: a rise is judged on its statistics and its noise, not
    /// on fixed byte gates. Their slope must reach the larger of this...
    pub exact_min_slope_bytes: u64,
    /// ...and this share of the series' noise σ per epoch (so a noisy "exact" floor is
    /// held to its noise), and their growth over the window this many bytes.
    pub exact_noise_slope: f64,
    pub exact_min_growth_bytes: u64,
    /// Their warm-up and shortest window: a leak from epoch 0 is judged from epoch 0.
    pub exact_warmup_epochs: u64,
    pub exact_min_window: usize,
    /// Severity follows the forecast: info when the OOM is at least this far away (days:
    /// worth knowing, not worth waking for).
    pub info_after_ms: i64,
    /// Set by `exact()`: the slope gate scales with the window's noise σ, and the median
    /// step must carry the rise (a step change with jitter around it has a median step of
    /// about zero; a leak's steps are all about its rate).
    #[serde(skip)]
    pub exact_gates: bool,
}

impl GrowthConfig {
    /// The gates for an exact series.
    pub fn exact(&self) -> GrowthConfig {
        GrowthConfig {
            min_slope_bytes: self.exact_min_slope_bytes,
            min_growth_bytes: self.exact_min_growth_bytes,
            min_growth_frac: 0.0,
            warmup_epochs: self.exact_warmup_epochs,
            min_window: self.exact_min_window,
            exact_gates: true,
            ..self.clone()
        }
    }
}

impl Default for GrowthConfig {
    fn default() -> Self {
        GrowthConfig {
            warmup_epochs: 1,
            min_window: 6,
            max_window: 20,
            envelope_epochs: 500,
            alpha: 0.01,
            min_slope_bytes: 8 * MIB_U64,
            min_growth_bytes: 64 * MIB_U64,
            min_growth_frac: 0.0005,
            min_signal_to_noise: 5.0,
            sustained_frac: 0.5,
            confirm: 2,
            critical_epochs: 10.0,
            window_ms: 10_000,
            window_warmup_ms: 20_000,
            exact_window_ms: 10_000,
            exact_window_warmup_ms: 20_000,
            nvml_window_ms: 20_000,
            nvml_window_warmup_ms: 40_000,
            exact_min_slope_bytes: MIB_U64,
            exact_noise_slope: 0.5,
            exact_min_growth_bytes: 4 * MIB_U64,
            exact_warmup_epochs: 0,
            exact_min_window: 5,
            info_after_ms: 24 * 3_600_000,
            exact_gates: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FragConfig {
    /// The risk condition must hold at every evaluation for this long before it is raised
    /// (a sample taken mid-step can see the big blocks in use).
    pub persist_ms: i64,
    /// An OOM alert stays active this long after the event, then moves to history.
    pub oom_hold_ms: i64,
    /// An OOM is a fragmentation OOM when the allocator held at least this many times the
    /// request free. Just over 1× is the normal slack of a caching allocator in partly
    /// used segments (19–22 % of reserved at the card-full OOMs of the H200 corpus, with
    /// T = 1.0–1.5 × the request): compacting it would serve the failing request and not
    /// the next one, so the process was out of memory, not fragmented.
    pub oom_free_multiple: f64,
    /// The retry-based risk also needs the free pieces to be at least this share of
    /// reserved: a caching allocator's normal mid-step slack was 19–22 % of reserved at the
    /// card-full OOMs of the first corpus; the fragmented runs of the second held 70–78 %.
    pub min_free_share: f64,
    /// Cache-fit risk (a recurring request that only the cache can serve): warning when
    /// the holes that fit it are at most this many more than a step needs at once...
    pub few_spare_holes: u64,
    /// ...or the hole a step needs is larger than the request by less than the larger of
    /// these (a share of the request, bytes): it just fits; critical with no spare hole.
    pub just_fit_frac: f64,
    pub just_fit_bytes: u64,
}

impl Default for FragConfig {
    fn default() -> Self {
        FragConfig {
            persist_ms: 15_000,
            oom_hold_ms: 10 * 60_000,
            oom_free_multiple: 2.0,
            min_free_share: 0.3,
            few_spare_holes: 1,
            just_fit_frac: 0.02,
            just_fit_bytes: 2 * MIB_U64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrabAllConfig {
    /// With a companion: the process holds at least this share of the card (NVML), half
    /// of it: what a preallocating framework takes from everyone else (JAX's default is
    /// 75 %, TensorFlow's nearly all), or it keeps more idle than the card has free while
    /// others share it...
    pub held_frac: f64,
    /// ...while its allocator has at most this share of what it holds in use...
    pub used_frac: f64,
    /// ...continuously for this long.
    pub persist_ms: i64,
    /// Also raise (at info level) when only NVML is known, saying it may be real use...
    pub nvml_only: bool,
    /// ...and only from this share of the card: without the allocator's numbers half the
    /// card is as likely a large model as a pool.
    pub nvml_held_frac: f64,
}

impl Default for GrabAllConfig {
    fn default() -> Self {
        GrabAllConfig {
            held_frac: 0.5,
            used_frac: 0.25,
            persist_ms: 120_000,
            nvml_only: true,
            nvml_held_frac: 0.8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeadroomConfig {
    /// Headroom below the typical request must persist this long.
    pub persist_ms: i64,
}

impl Default for HeadroomConfig {
    fn default() -> Self {
        HeadroomConfig { persist_ms: 60_000 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Alerts kept in history (raised and cleared), oldest dropped first.
    pub history: usize,
    /// An acknowledged alert speaks again when its forecast shrinks to this share of the
    /// forecast at acknowledgement (or its severity rises).
    pub ack_forecast_shrink: f64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            history: 256,
            ack_forecast_shrink: 0.5,
        }
    }
}

impl AlertConfig {
    /// Values a rule cannot work with, named by key: a window of 0 points or `confirm = 0`
    /// would make a rule fire on nothing or never, silently (config values
    /// range-checked). JSON/TOML already refused wrong types and unknown keys.
    pub fn check(&self) -> Result<(), String> {
        let g = &self.growth;
        let f = &self.fragmentation;
        let a = &self.grab_all;
        let share = |v: f64| (0.0..=1.0).contains(&v);
        let d = &self.divergent_rank;
        let rules: [(&str, bool, &str); 27] = [
            (
                "divergent_rank.min_epochs",
                d.min_epochs >= 3 && d.max_epochs >= d.min_epochs,
                "at least 3, and max_epochs at least min_epochs",
            ),
            ("divergent_rank.confirm", d.confirm >= 1, "at least 1"),
            (
                "divergent_rank.widening_share",
                share(d.widening_share),
                "a share from 0 to 1",
            ),
            (
                "growth.alpha",
                g.alpha > 0.0 && g.alpha < 1.0,
                "above 0 and below 1 (a probability)",
            ),
            ("growth.min_window", g.min_window >= 3, "at least 3 points"),
            (
                "growth.max_window",
                g.max_window >= g.min_window,
                "at least growth.min_window",
            ),
            (
                "growth.exact_min_window",
                g.exact_min_window >= 3,
                "at least 3 points",
            ),
            ("growth.confirm", g.confirm >= 1, "at least 1"),
            (
                "growth.min_growth_frac",
                share(g.min_growth_frac),
                "a share from 0 to 1",
            ),
            (
                "growth.sustained_frac",
                share(g.sustained_frac),
                "a share from 0 to 1",
            ),
            (
                "growth.min_signal_to_noise",
                g.min_signal_to_noise >= 0.0,
                "0 or more",
            ),
            (
                "growth.exact_noise_slope",
                g.exact_noise_slope >= 0.0,
                "0 or more",
            ),
            (
                "growth.critical_epochs",
                g.critical_epochs > 0.0,
                "more than 0",
            ),
            ("growth.window_ms", g.window_ms > 0, "more than 0 ms"),
            (
                "growth.exact_window_ms",
                g.exact_window_ms > 0,
                "more than 0 ms",
            ),
            (
                "growth.nvml_window_ms",
                g.nvml_window_ms > 0,
                "more than 0 ms",
            ),
            (
                "growth.window_warmup_ms",
                g.window_warmup_ms >= 0,
                "0 ms or more",
            ),
            (
                "growth.info_after_ms",
                g.info_after_ms > 0,
                "more than 0 ms",
            ),
            (
                "fragmentation.persist_ms",
                f.persist_ms >= 0,
                "0 ms or more",
            ),
            (
                "fragmentation.oom_hold_ms",
                f.oom_hold_ms >= 0,
                "0 ms or more",
            ),
            (
                "fragmentation.oom_free_multiple",
                f.oom_free_multiple >= 1.0,
                "at least 1",
            ),
            (
                "fragmentation.min_free_share",
                share(f.min_free_share),
                "a share from 0 to 1",
            ),
            (
                "fragmentation.just_fit_frac",
                share(f.just_fit_frac),
                "a share from 0 to 1",
            ),
            (
                "grab_all.held_frac",
                share(a.held_frac),
                "a share from 0 to 1",
            ),
            (
                "grab_all.used_frac",
                share(a.used_frac),
                "a share from 0 to 1",
            ),
            (
                "grab_all.nvml_held_frac",
                share(a.nvml_held_frac),
                "a share from 0 to 1",
            ),
            (
                "engine.ack_forecast_shrink",
                share(self.engine.ack_forecast_shrink),
                "a share from 0 to 1",
            ),
        ];
        match rules.iter().find(|(_, ok, _)| !ok) {
            Some((key, _, want)) => Err(format!("{key} must be {want}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_config_keeps_other_defaults() {
        let c: AlertConfig =
            serde_json::from_str(r#"{"growth":{"alpha":0.001},"grab_all":{"nvml_only":false}}"#)
                .expect("valid json literal");
        assert_eq!(c.growth.alpha, 0.001);
        assert_eq!(c.growth.min_window, 6);
        assert!(!c.grab_all.nvml_only);
        assert_eq!(c.fragmentation, FragConfig::default());
    }

    #[test]
    fn values_no_rule_can_use_are_refused_by_key() {
        assert_eq!(AlertConfig::default().check(), Ok(()));
        for (json, key) in [
            (r#"{"growth":{"confirm":0}}"#, "growth.confirm"),
            (r#"{"growth":{"max_window":0}}"#, "growth.max_window"),
            (r#"{"growth":{"alpha":1.5}}"#, "growth.alpha"),
            (r#"{"grab_all":{"held_frac":2.0}}"#, "grab_all.held_frac"),
            (
                r#"{"fragmentation":{"oom_free_multiple":0.5}}"#,
                "fragmentation.oom_free_multiple",
            ),
        ] {
            let c: AlertConfig = serde_json::from_str(json).expect("parses");
            let e = c.check().expect_err(json);
            assert!(e.starts_with(key), "{json}: {e}");
        }
    }
}
