//! The alert changes of a replay, as `--alerts-jsonl` writes them: the pipeline's own
//! alert-log sink writes into memory here, so the page quotes the very lines a headless
//! run prints (no second serialisation to drift from the first).

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::model::alerts::{AlertKind, Evidence, Severity};
use crate::model::time::Ts;

/// An `alerts_out` sink that keeps what is written.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut v) => {
                v.extend_from_slice(buf);
                Ok(buf.len())
            }
            Err(_) => Err(std::io::Error::other("alert capture poisoned")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Every line written so far, parsed; a line that does not parse is an error (it would
    /// mean the sink's format changed without this reader).
    pub fn lines(&self) -> Result<Vec<AlertLine>, String> {
        let bytes = self.0.lock().map_err(|_| "alert capture poisoned")?.clone();
        let text = String::from_utf8_lossy(&bytes);
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(AlertLine::parse)
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Raised,
    Worsened,
    Eased,
    Cleared,
}

impl Change {
    pub fn label(self) -> &'static str {
        match self {
            Change::Raised => "raised",
            Change::Worsened => "worsened",
            Change::Eased => "eased",
            Change::Cleared => "cleared",
        }
    }
}

/// One alert change: the JSON line exactly as written, and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertLine {
    pub raw: String,
    pub at: Ts,
    pub change: Change,
    pub epoch: Option<u64>,
    pub kind: AlertKind,
    pub severity: Severity,
    pub pid: Option<u32>,
    pub gpu: u32,
    pub summary: String,
    pub message: String,
    pub evidence: Evidence,
}

#[derive(Deserialize)]
struct Fields {
    time: String,
    change: Change,
    epoch: Option<u64>,
    kind: AlertKind,
    severity: Severity,
    pid: Option<u32>,
    gpu: u32,
    summary: String,
    message: String,
    evidence: Evidence,
}

impl AlertLine {
    pub fn parse(line: &str) -> Result<AlertLine, String> {
        let f: Fields =
            serde_json::from_str(line).map_err(|e| format!("unreadable alert line: {e}"))?;
        let at = chrono::DateTime::parse_from_rfc3339(&f.time)
            .map_err(|e| format!("alert time '{}': {e}", f.time))?
            .timestamp_millis();
        Ok(AlertLine {
            raw: line.trim().to_string(),
            at,
            change: f.change,
            epoch: f.epoch,
            kind: f.kind,
            severity: f.severity,
            pid: f.pid,
            gpu: f.gpu,
            summary: f.summary,
            message: f.message,
            evidence: f.evidence,
        })
    }

    /// `(kind, pid, gpu)`: one alert's identity across its changes.
    pub fn key(&self) -> (AlertKind, Option<u32>, u32) {
        (self.kind, self.pid, self.gpu)
    }

    pub fn is_oom(&self) -> bool {
        matches!(self.kind, AlertKind::Oom | AlertKind::FragmentationOom)
    }
}
