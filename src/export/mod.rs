//! Export to tools people already run: a Prometheus/OpenMetrics endpoint and
//! flat CSV/JSONL logs. Everything here reads the model; nothing samples.

pub(crate) mod alerts;
pub(crate) mod allocator;
pub(crate) mod encode;
pub mod flat;
pub mod http;
pub(crate) mod json;
mod labels;
pub mod line_file;
pub mod metrics;
pub mod snapshot;

use std::sync::{Arc, Mutex, PoisonError};

use crate::model::alerts::Alert;
use crate::model::state::State;

pub use alerts::AlertRow;
pub use encode::Format;
pub use flat::{FlatFormat, FlatLog};
pub use http::Limits;
pub use line_file::LineFile;
pub use snapshot::Snapshot;

/// Default listen address: loopback, so metrics are never exposed by accident.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// Hands the newest model values to the HTTP endpoint.
///
/// The event loop calls `publish` after each batch of frames: it copies a few
/// hundred plain values (no formatting, no I/O, a swap under a lock held for a
/// pointer write). Text is rendered only when a scraper asks, from the latest
/// published snapshot, so the sampler never waits on a scrape and an unscraped
/// endpoint costs only that copy.
pub struct Exporter {
    hostname: String,
    current: Mutex<Arc<Snapshot>>,
    alerts: Mutex<Arc<Vec<AlertRow>>>,
}

impl Exporter {
    pub fn new(hostname: String) -> Self {
        let snapshot = Snapshot {
            hostname: hostname.clone(),
            ..Snapshot::default()
        };
        Exporter {
            hostname,
            current: Mutex::new(Arc::new(snapshot)),
            alerts: Mutex::new(Arc::new(Vec::new())),
        }
    }

    pub fn publish(&self, state: &State) {
        let next = Arc::new(Snapshot::from_state(state, &self.hostname));
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

    /// Exposition text of the latest snapshot.
    pub fn render(&self, format: Format) -> String {
        let alerts = Arc::clone(&self.alerts.lock().unwrap_or_else(PoisonError::into_inner));
        metrics::render(&self.snapshot(), &alerts, format)
    }
}
