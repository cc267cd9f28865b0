//! Everything that happens to a frame once it arrives, in every mode (TUI,
//! record, serve, headless): the model, alert evaluation, and the sinks
//! (recording, flat logs, alert log, Prometheus snapshot).

use std::io::Write;
use std::sync::Arc;

use crate::export::Exporter;
use crate::export::flat::FlatLog;
use crate::frame::{Frame, Level};
use crate::model::alerts::engine::{AlertChange, AlertEngine, ChangeKind};
use crate::model::alerts::{Alert, Severity};
use crate::model::state::State;
use crate::model::time::{Ts, rfc3339};
use crate::record::Recorder;
use crate::wire::Message;

/// Alerts are re-evaluated at most this often (data time), and at every epoch or event.
const EVAL_EVERY_MS: i64 = 1_000;

#[derive(Default)]
pub struct Sinks {
    pub recorder: Option<Recorder>,
    pub exporter: Option<Arc<Exporter>>,
    pub flat: Vec<FlatLog>,
    pub alerts_out: Option<Box<dyn Write + Send>>,
}

pub struct Pipeline {
    pub state: State,
    pub alerts: AlertEngine,
    pub sinks: Sinks,
    last_eval: Ts,
    /// An alert raised or worsened since the loop last looked (terminal bell).
    pub ring: bool,
    /// Stop with a non-zero exit when an alert reaches this severity.
    pub exit_on: Option<Severity>,
    pub tripped: Option<Alert>,
    sink_error: bool,
}

impl Pipeline {
    pub fn new(sinks: Sinks) -> Pipeline {
        Pipeline {
            state: State::default(),
            alerts: AlertEngine::default(),
            sinks,
            last_eval: Ts::MIN,
            ring: false,
            exit_on: None,
            tripped: None,
            sink_error: false,
        }
    }

    /// Replay jumped backwards: start the model and the alerts afresh.
    pub fn reset(&mut self) {
        self.state = State::default();
        self.alerts = AlertEngine::new(self.alerts.config().clone());
        self.last_eval = Ts::MIN;
    }

    pub fn apply(&mut self, f: &Frame) {
        self.state.apply(f);
        // Alerts in a recording are what an earlier gpumon said; the engine re-derives its own,
        // so they are shown as messages but not re-recorded.
        if matches!(f, Frame::Alert(_)) {
            return;
        }
        if let Some(r) = &self.sinks.recorder {
            r.write(f);
            if let Some(e) = r.error() {
                self.sinks.recorder = None;
                self.sink_failed(format!("recording stopped: {e}"));
            }
        }
        if let Frame::Tick(t) = f {
            let mut failed = None;
            for log in &mut self.sinks.flat {
                if let Err(e) = log.write_tick(&self.state, t) {
                    failed = Some(e);
                }
            }
            if let Some(e) = failed {
                self.sink_failed(format!("flat log write failed: {e}"));
            }
        }
        let event_like = match f {
            Frame::Companion(c) => {
                matches!(
                    c.msg,
                    Message::Epoch(_) | Message::Event(_) | Message::Frag(_) | Message::History(_)
                )
            }
            _ => false,
        };
        let due =
            matches!(f, Frame::Tick(_)) && f.time().saturating_sub(self.last_eval) >= EVAL_EVERY_MS;
        if due || event_like {
            self.last_eval = f.time();
            let changes = self.alerts.evaluate(&self.state);
            for c in changes {
                self.on_change(c);
            }
        }
    }

    fn on_change(&mut self, c: AlertChange) {
        if c.wants_bell() {
            self.ring = true;
        }
        if let (Some(min), ChangeKind::Raised | ChangeKind::Worsened) = (self.exit_on, c.change) {
            if c.alert.severity >= min && self.tripped.is_none() {
                self.tripped = Some(c.alert.clone());
            }
        }
        if let Some(out) = &mut self.sinks.alerts_out {
            let line = serde_json::json!({
                "time": rfc3339(c.at),
                "change": c.change,
                "epoch": c.alert.raised_epoch,
                "kind": c.alert.kind,
                "severity": c.alert.severity,
                "pid": c.alert.pid,
                "gpu": c.alert.gpu,
                "summary": c.alert.summary,
                "message": c.alert.message,
                "evidence": c.alert.evidence,
            });
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                self.sinks.alerts_out = None;
                self.sink_failed("alert log write failed; alert logging stopped".into());
            }
        }
        let frame = Frame::Alert(Box::new(c));
        if let Some(r) = &self.sinks.recorder {
            r.write(&frame);
        }
        self.state.apply(&frame);
    }

    fn sink_failed(&mut self, text: String) {
        if !self.sink_error {
            self.sink_error = true;
            let t = self.state.now;
            self.state
                .apply(&Frame::status(t, "output", Level::Error, text));
        }
    }

    /// Hand the newest values to the Prometheus endpoint (cheap: no formatting).
    pub fn publish(&self) {
        if let Some(e) = &self.sinks.exporter {
            e.publish(&self.state);
            e.publish_alerts(&self.alerts.active());
        }
    }
}
