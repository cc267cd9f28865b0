//! One line of `--alerts-jsonl` per alert change, serialised from the change itself. The
//! fields are this struct's (docs/alerts.schema.json is checked against them by
//! tests/it/alerts_schema.rs); their text is the recording's serde spelling of each value.

use serde::Serialize;

use crate::model::alerts::{AlertChange, AlertKind, ChangeKind, Evidence, Severity};
use crate::model::time::rfc3339;

/// The line's fields. Written through `serde_json::Value`, whose maps keep keys sorted, so
/// the keys come out in alphabetical order at every depth: the shape
/// every alert log written so far has, which readers of old logs rely on.
#[derive(Debug, Serialize)]
pub struct AlertLine<'a> {
    /// When the change happened, RFC 3339 with milliseconds, UTC.
    pub time: String,
    pub change: ChangeKind,
    /// The epoch the alert was raised in, when the process reports epochs.
    pub epoch: Option<u64>,
    pub kind: AlertKind,
    pub severity: Severity,
    pub pid: Option<u32>,
    pub gpu: u32,
    pub summary: &'a str,
    pub message: &'a str,
    pub evidence: &'a Evidence,
}

impl<'a> AlertLine<'a> {
    pub fn of(c: &'a AlertChange) -> AlertLine<'a> {
        let a = &c.alert;
        AlertLine {
            time: rfc3339(c.at),
            change: c.change,
            epoch: a.raised_epoch,
            kind: a.kind,
            severity: a.severity,
            pid: a.pid,
            gpu: a.gpu,
            summary: &a.summary,
            message: &a.message,
            evidence: &a.evidence,
        }
    }

    /// The line, newline included.
    pub fn to_line(&self) -> String {
        // Nothing in an alert can fail to serialise (string keys, plain values), as the
        // recorder relies on too.
        let value = serde_json::to_value(self).expect("an alert change serialises");
        format!("{value}\n")
    }
}
