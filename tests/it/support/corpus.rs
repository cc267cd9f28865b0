//! Shared by the corpus tests that replay labelled runs and read the alerts they raise: the
//! pipeline's `--alerts-jsonl` sink captured in memory (the format users read), the label
//! files' alert kinds, and the median their quality tables report.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;

#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

/// A label's alert kind(s): one string or a list of them.
pub fn kinds(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

pub fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// A headless pipeline whose `--alerts-jsonl` lines land in the returned buffer, as
/// `gpumon replay --headless --alerts-jsonl -` writes them.
pub fn alert_pipeline(
    cfg: gpumon::model::alerts::AlertConfig,
) -> (gpumon::pipeline::Pipeline, Captured) {
    let log = Captured::default();
    let mut pipe = gpumon::pipeline::Pipeline::new(gpumon::pipeline::Sinks {
        alerts_out: Some(gpumon::export::LineFile::new(
            Box::new(log.clone()),
            "alerts",
        )),
        ..gpumon::pipeline::Sinks::default()
    });
    pipe.alerts = gpumon::model::alerts::AlertEngine::new(cfg);
    (pipe, log)
}
