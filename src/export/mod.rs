//! Export to tools people already run: a Prometheus/OpenMetrics endpoint and
//! flat CSV/JSONL logs. Everything here reads the model; nothing samples.

pub mod alert_line;
pub(crate) mod alerts;
pub(crate) mod allocator;
pub(crate) mod encode;
pub mod flat;
pub mod http;
mod http_auth;
pub(crate) mod json;
mod labels;
pub mod line_file;
pub mod metrics;
pub mod snapshot;
pub mod snapshot_table;
pub mod web_config;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::model::alerts::Alert;
use crate::model::state::State;

pub use alerts::AlertRow;
pub use encode::Format;
pub use flat::{FlatFormat, FlatLog};
pub use http::Limits;
pub use line_file::LineFile;
pub use snapshot::Snapshot;

/// Default listen address: loopback, so metrics are never exposed by accident.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:19464";

/// Hands the newest model values to the HTTP endpoint.
///
/// The event loop calls `publish` after each batch of frames: it copies a few
/// hundred plain values (no formatting, no I/O, a swap under a lock held for a
/// pointer write). Text is rendered only when a scraper asks, from the latest
/// published snapshot, so the sampler never waits on a scrape and an unscraped
/// endpoint costs only that copy.
pub struct Exporter {
    hostname: String,
    /// `--node`: the name in every series, over the recording's or machine's own.
    node: Option<String>,
    current: Mutex<Arc<Snapshot>>,
    alerts: Mutex<Arc<Vec<AlertRow>>>,
    fresh: Mutex<Freshness>,
}

/// When the sampler last produced a sample, for `/healthz`: a publish whose tick count
/// moved. Publishes without a new sample (companion traffic, a UI redraw) do not count,
/// so a dead sampler shows as stale even while other events keep arriving.
#[derive(Debug, Default, Clone, Copy)]
struct Freshness {
    ticks: u64,
    at: Option<Instant>,
    interval: Duration,
}

/// What `/healthz` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// A sample arrived within the allowed gap; how long ago.
    Fresh(Duration),
    /// No sample yet since the endpoint started.
    NoSample,
    /// The newest sample is older than allowed: how old, and the limit.
    Stale(Duration, Duration),
}

/// Shortest gap `/healthz` tolerates whatever the sampling interval: a scrape right
/// after a 1 s interval's sample was late by a scheduling hiccup is not an outage.
pub const HEALTH_MIN_GAP: Duration = Duration::from_secs(10);
/// Missed samples tolerated before `/healthz` says stale.
pub const HEALTH_MISSED_SAMPLES: u32 = 3;

impl Exporter {
    pub fn new(hostname: String) -> Self {
        let snapshot = Snapshot {
            hostname: hostname.clone(),
            ..Snapshot::default()
        };
        Exporter {
            hostname,
            node: None,
            current: Mutex::new(Arc::new(snapshot)),
            alerts: Mutex::new(Arc::new(Vec::new())),
            fresh: Mutex::new(Freshness::default()),
        }
    }

    /// Name the node in every series, whatever host a recording or the machine names.
    pub fn named(mut self, node: Option<String>) -> Self {
        if let Some(n) = &node {
            self.hostname.clone_from(n);
            self.current
                .get_mut()
                .map(|s| Arc::make_mut(s).hostname.clone_from(n))
                .ok();
        }
        self.node = node;
        self
    }

    pub fn publish(&self, state: &State) {
        let mut next = Snapshot::from_state(state, &self.hostname);
        if let Some(n) = &self.node {
            next.hostname.clone_from(n);
        }
        let next = Arc::new(next);
        {
            let mut f = self.fresh.lock().unwrap_or_else(PoisonError::into_inner);
            if next.ticks != f.ticks {
                f.ticks = next.ticks;
                f.at = Some(Instant::now());
            }
            if let Some(h) = &state.header {
                f.interval = Duration::from_millis(h.interval_ms);
            }
        }
        let old = std::mem::replace(
            &mut *self.current.lock().unwrap_or_else(PoisonError::into_inner),
            next,
        );
        // Dropped outside the lock so a scrape never waits on deallocation.
        drop(old);
    }

    /// Replace the active alerts (the engine lives in the event loop, not in
    /// `State`); call after each evaluation, with `AlertEngine::active()`.
    pub fn publish_alerts(&self, active: &[&Alert]) {
        let rows = Arc::new(active.iter().map(|a| AlertRow::from_alert(a)).collect());
        let old = std::mem::replace(
            &mut *self.alerts.lock().unwrap_or_else(PoisonError::into_inner),
            rows,
        );
        drop(old);
    }

    /// The latest published snapshot; cheap (an `Arc` clone).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The latest snapshot and alerts, as `render` uses them (the HTTP side
    /// caches its rendered body per pair).
    pub fn inputs(&self) -> (Arc<Snapshot>, Arc<Vec<AlertRow>>) {
        let alerts = Arc::clone(&self.alerts.lock().unwrap_or_else(PoisonError::into_inner));
        (self.snapshot(), alerts)
    }

    /// Whether the sampler is alive: stale once no new sample arrived for
    /// `HEALTH_MISSED_SAMPLES` sampling intervals (at least `HEALTH_MIN_GAP`).
    pub fn health(&self) -> Health {
        self.health_at(Instant::now())
    }

    /// `health` as seen at `now` (tests look ahead rather than sleep).
    pub fn health_at(&self, now: Instant) -> Health {
        let f = *self.fresh.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = f.at else {
            return Health::NoSample;
        };
        let limit = (f.interval * HEALTH_MISSED_SAMPLES).max(HEALTH_MIN_GAP);
        let age = now.saturating_duration_since(at);
        if age > limit {
            Health::Stale(age, limit)
        } else {
            Health::Fresh(age)
        }
    }

    /// Exposition text of the latest snapshot.
    pub fn render(&self, format: Format) -> String {
        let alerts = Arc::clone(&self.alerts.lock().unwrap_or_else(PoisonError::into_inner));
        metrics::render(&self.snapshot(), &alerts, format)
    }
}
