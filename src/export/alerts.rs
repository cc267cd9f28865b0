//! Active alerts as gauges, so Alertmanager and Grafana see what the TUI shows.

use crate::model::alerts::Alert;

use super::encode::{Encoder, Kind, Value};
use super::labels::{GpuLabels, ProcKey, proc_family};
use super::snapshot::Snapshot;

/// One active alert, copied from the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    /// `growth`, `cache_growth`, `fragmentation_risk`, ... (the recording's names).
    pub kind: String,
    pub severity: &'static str,
    pub gpu: u32,
    pub pid: Option<u32>,
    pub user: String,
    pub process: String,
    /// Forecast time until memory runs out, when the rule could estimate it.
    pub exhaustion_s: Option<f64>,
}

impl AlertRow {
    pub fn from_alert(a: &Alert) -> AlertRow {
        // The serde name is the stable, snake_case spelling recordings use.
        let kind = serde_json::to_value(a.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", a.kind).to_ascii_lowercase());
        AlertRow {
            kind,
            severity: a.severity.label(),
            gpu: a.gpu,
            pid: a.pid,
            user: String::new(),
            process: String::new(),
            exhaustion_s: a
                .evidence
                .forecast
                .as_ref()
                .and_then(|f| f.ms)
                .map(|ms| ms.max(0) as f64 / 1000.0),
        }
    }
}

impl ProcKey for AlertRow {
    fn gpu(&self) -> u32 {
        self.gpu
    }
    fn pid(&self) -> Option<u32> {
        self.pid
    }
    fn user(&self) -> &str {
        &self.user
    }
    fn process(&self) -> &str {
        &self.process
    }
}

pub(super) fn render(
    e: &mut Encoder,
    s: &Snapshot,
    gpu_labels: &[GpuLabels<'_>],
    alerts: &[AlertRow],
) {
    // Names come from the latest snapshot, so alerts and memory series share labels.
    let rows: Vec<AlertRow> = alerts
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if let Some(p) = s.procs.iter().find(|p| Some(p.pid) == a.pid) {
                a.user.clone_from(&p.user);
                a.process.clone_from(&p.process);
            }
            a
        })
        .collect();
    proc_family(
        e,
        s,
        gpu_labels,
        &rows,
        (
            "gpumon_alert",
            Kind::Gauge,
            None,
            "1 for each active gpumon alert (kind, severity); absent when none.",
        ),
        |a, emit| {
            emit(
                &[("kind", &a.kind), ("severity", a.severity)],
                Value::Int(1),
            )
        },
    );
    proc_family(
        e,
        s,
        gpu_labels,
        &rows,
        (
            "gpumon_alert_exhaustion_seconds",
            Kind::Gauge,
            Some("seconds"),
            "Forecast time until memory runs out, for alerts that forecast it.",
        ),
        |a, emit| {
            if let Some(secs) = a.exhaustion_s {
                emit(
                    &[("kind", &a.kind), ("severity", a.severity)],
                    Value::Float(secs),
                );
            }
        },
    );
}
