//! Alerts that see an OOM coming: steady growth with a forecast, fragmentation risk,
//! grab-all allocators and low headroom (docs/alerts.md).
//!
//! Rules are pure functions over plain inputs, so they are tested without a GPU, a
//! companion or a terminal. `from_state` builds a snapshot of the world (`inputs`) from the
//! model, `assemble` turns it into each rule's input, and `engine` owns the alert lifecycle
//! (raise, worsen, ease, clear, acknowledge, history). `names` is the vocabulary of the
//! evidence alerts are recorded with.

pub mod assemble;
pub mod cache_fit;
pub mod config;
pub mod divergent_rank;
pub mod engine;
pub mod format;
pub mod fragmentation;
pub mod from_state;
pub mod grab_all;
pub mod growth;
pub mod headroom;
pub mod inputs;
pub mod memo;
pub mod memory;
pub mod names;
pub mod oom;
pub mod oom_math;
pub mod retry_risk;
pub mod staircase;
pub mod stats;
pub mod trend;
pub mod workset;

use serde::{Deserialize, Serialize};

use crate::model::time::Ts;

pub use config::AlertConfig;
pub use engine::AlertEngine;
pub use names::{CeilingSource, GateName, StepUnit, TrendSeries, ValueName};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    /// Parses `info`, `warning`/`warn`, `critical`/`crit` (for `--exit-on-alert`).
    pub fn parse(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "info" => Some(Severity::Info),
            "warning" | "warn" => Some(Severity::Warning),
            "critical" | "crit" => Some(Severity::Critical),
            _ => None,
        }
    }
}

/// Defines `AlertKind` with its words and the list of every kind, from one list: a new
/// kind is one line here, and the tests that walk every kind (the schema's list, the
/// report's headlines) see it without an edit of their own.
macro_rules! alert_kinds {
    ($($(#[$doc:meta])* $kind:ident => $label:literal,)+) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum AlertKind {
            $($(#[$doc])* $kind,)+
        }

        impl AlertKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [AlertKind] = &[$(AlertKind::$kind),+];

            /// The kind in a person's words.
            pub fn label(self) -> &'static str {
                match self {
                    $(AlertKind::$kind => $label,)+
                }
            }
        }
    };
}

alert_kinds! {
    /// Allocated memory (floor or epoch peak) grows steadily: a leak or growing transients.
    Growth => "growth",
    /// Reserved grows while allocated stays flat: the cache fragments, not a leak.
    CacheGrowth => "cache growth",
    /// The next large request fits in the allocator's free total but in no single hole.
    FragmentationRisk => "fragmentation risk",
    /// An OOM happened although the allocator held enough free bytes in total.
    FragmentationOom => "fragmentation OOM",
    /// An OOM happened and the free bytes were not enough either.
    Oom => "OOM",
    /// A process holds most of a card while its allocator uses little of it.
    GrabAll => "grab-all",
    /// The largest allocation that would succeed now is below the run's typical request.
    Headroom => "headroom",
    /// One rank of a distributed job keeps more memory than its peers, more every epoch.
    DivergentRank => "divergent rank",
}

/// Identity of an alert: one per kind, process and GPU (NVML index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlertKey {
    pub kind: AlertKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub gpu: u32,
}

/// What the alert was computed from; the message says when the basis is coarse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Per-epoch points from the companion's epoch markers.
    #[default]
    Epochs,
    /// Fixed time windows over the allocator's or NVML's numbers (no epoch markers).
    TimeWindows,
    /// Live allocator state from the companion.
    Allocator,
    /// NVML only: cannot see inside the allocator.
    Nvml,
    /// An event the companion reported (OOM).
    Event,
    /// Raised by the gpumon on another node and read from its metrics: the evidence stays
    /// there.
    Remote,
}

/// One point of the series an alert was judged on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Epoch number, or window index for time windows.
    pub x: i64,
    pub t: Ts,
    pub bytes: u64,
}

/// One effect-size or significance gate, with the value it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub name: GateName,
    pub value: f64,
    pub threshold: f64,
    pub passed: bool,
}

/// A named byte count (T, L, D, R, held, used...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    pub name: ValueName,
    pub bytes: u64,
}

/// Time to exhaustion at the current rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    /// The real ceiling: allocator limit or card memory not held by others.
    pub ceiling: u64,
    pub ceiling_source: CeilingSource,
    /// The value that will hit the ceiling (latest epoch peak, or latest usage).
    pub current: u64,
    /// Bytes per step (epoch or window).
    pub rate: f64,
    /// Steps until the ceiling is reached (0 when already there).
    pub steps: f64,
    /// Wall-clock estimate from the recent step duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<i64>,
    /// Epoch at which the ceiling is reached, when epochs are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_epoch: Option<f64>,
}

/// Everything an alert was decided on, for the panel and for recordings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Evidence {
    pub basis: Basis,
    /// Which series the trend was found in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<TrendSeries>,
    /// The x unit of `points` and `slope`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<StepUnit>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<Point>,
    /// Theil–Sen slope in bytes per unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope: Option<f64>,
    /// One-sided Mann–Kendall p-value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<Gate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<Forecast>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Named>,
    /// Number of events folded into this alert (OOMs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// What a rule returns: an alert before the engine gives it a lifecycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub key: AlertKey,
    pub severity: Severity,
    pub message: String,
    pub summary: String,
    pub evidence: Evidence,
    /// Epoch the process was in when this was decided, if known.
    pub epoch: Option<u64>,
}

/// One alert with its lifecycle, as the UI shows it and recordings store it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub gpu: u32,
    /// One or more full sentences.
    pub message: String,
    /// At most `SUMMARY_MAX` characters, for the alert bar in a 40-column pane.
    pub summary: String,
    pub evidence: Evidence,
    pub raised_at: Ts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_epoch: Option<u64>,
    pub updated_at: Ts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared_at: Option<Ts>,
    /// Acknowledged and not worse since: hidden from the bar, kept in the panel.
    #[serde(default)]
    pub silenced: bool,
}

impl Alert {
    pub fn key(&self) -> AlertKey {
        AlertKey {
            kind: self.kind,
            pid: self.pid,
            gpu: self.gpu,
        }
    }

    /// Steps to exhaustion, the measure acknowledgement compares (always present when
    /// there is a forecast, unlike the wall-clock estimate).
    pub fn forecast_steps(&self) -> Option<f64> {
        self.evidence.forecast.as_ref().map(|f| f.steps)
    }
}

/// Summaries fit a 40-column pane with a two-character severity mark.
pub const SUMMARY_MAX: usize = 38;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Raised,
    /// Severity rose, the forecast shrank by the configured share, or another OOM came.
    Worsened,
    /// Severity fell.
    Eased,
    Cleared,
}

/// One line of `--alerts-jsonl`: what happened, when, and the alert as it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertChange {
    pub change: ChangeKind,
    pub at: Ts,
    pub alert: Alert,
}

impl AlertChange {
    /// Whether this change deserves the terminal bell.
    pub fn wants_bell(&self) -> bool {
        matches!(self.change, ChangeKind::Raised | ChangeKind::Worsened)
            && !self.alert.silenced
            && self.alert.severity >= Severity::Warning
    }
}
