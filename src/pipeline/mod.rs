//! Everything that happens to a frame once it arrives, in every mode (TUI,
//! record, serve, headless): the model, alert evaluation, and the sinks
//! (recording, flat logs, alert log, Prometheus snapshot).

pub mod filter;

use std::sync::Arc;

use crate::export::Exporter;
use crate::export::LineFile;
use crate::export::alert_line::AlertLine;
use crate::export::flat::FlatLog;
use crate::model::alerts::{Alert, Severity};
use crate::model::alerts::{AlertChange, AlertEngine, ChangeKind};
use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::model::state::State;
use crate::model::time::Ts;
use crate::record::Recorder;

/// Alerts are re-evaluated at most this often (data time), and at every epoch or event.
const EVAL_EVERY_MS: i64 = 1_000;

#[derive(Default)]
pub struct Sinks {
    pub recorder: Option<Recorder>,
    pub exporter: Option<Arc<Exporter>>,
    pub flat: Vec<FlatLog>,
    pub alerts_out: Option<LineFile>,
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
    /// Newest data time written to the flat logs and the alert log, and, after a replay
    /// seeked back, the time up to which frames only rebuild the model: outputs must not
    /// get the same rows twice.
    written_until: Ts,
    rebuild_until: Ts,
    /// `--gpu/--user/--pid`: what is left out before the model, the alerts and the sinks.
    pub filter: crate::pipeline::filter::Filter,
    /// Why the recorder stopped on a write error; a mode that exists to record
    /// (`record`, headless `--record`) stops loudly on it (`take_recording_failure`).
    recording_failed: Option<String>,
    notices: Vec<String>,
    /// The first flat log or alert log write error; that output is cut at its
    /// last whole line and dropped, and a headless run stops loudly on it.
    output_failed: Option<String>,
    /// An output's reader went away (`--alerts-jsonl - | head -1`): a headless run has
    /// nothing left to do and ends quietly, as other Unix tools do on a closed pipe.
    output_closed: bool,
    /// Alerts raised (not re-raised by a replay's rebuild), for a headless replay's summary.
    pub raised: u64,
    /// The data comes from another gpumon's metrics, alerts included (`adopt_alerts`): the
    /// rules do not run here, on series rebuilt from coarser samples than the node's own.
    pub remote_alerts: bool,
}

impl Default for Pipeline {
    /// No sinks, default alert thresholds, no filter (tests, `snapshot`).
    fn default() -> Pipeline {
        Pipeline::new(Sinks::default())
    }
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
            written_until: Ts::MIN,
            rebuild_until: Ts::MIN,
            filter: crate::pipeline::filter::Filter::default(),
            recording_failed: None,
            notices: Vec::new(),
            output_failed: None,
            output_closed: false,
            raised: 0,
            remote_alerts: false,
        }
    }

    /// Replay jumped backwards: start the model and the alerts afresh.
    pub fn reset(&mut self) {
        let keep = self.state.keep_exited_ms;
        self.state = State::default();
        self.state.keep_exited_ms = keep;
        self.alerts = AlertEngine::new(self.alerts.config().clone());
        self.last_eval = Ts::MIN;
        self.rebuild_until = self.written_until;
    }

    pub fn apply(&mut self, f: &Frame) {
        let kept = self.filter.frame(f);
        if let Some(kept) = kept {
            self.apply_kept(&kept);
        }
        if let Some(text) = self.filter.take_notice() {
            // On the status line, and on stderr for the headless modes (`take_notices`).
            let t = f.time();
            self.state.apply(&Frame::status(
                t,
                StatusSource::Filter,
                Level::Warn,
                text.clone(),
            ));
            self.notices.push(text);
        }
    }

    /// What the filter had to say since the last call (headless modes print it).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    fn apply_kept(&mut self, f: &Frame) {
        let exits = self.state.exits;
        self.state.apply(f);
        if matches!(f, Frame::Header(_)) {
            self.filter.prune(&mut self.state);
        }
        // Alerts in a recording are what an earlier gpumon said; the engine re-derives its own,
        // so they are shown as messages but not re-recorded.
        if matches!(f, Frame::Alert(_)) {
            return;
        }
        if let Some(r) = &self.sinks.recorder {
            r.write(f);
            if let Some(e) = r.error() {
                self.sinks.recorder = None;
                self.recording_failed = Some(e.clone());
                self.sink_failed(format!("recording stopped: {e}"));
            }
        }
        let fresh = f.time() > self.rebuild_until;
        if fresh {
            self.written_until = self.written_until.max(f.time());
        }
        if let (Frame::Tick(t), true) = (f, fresh) {
            let mut failed = None;
            let state = &self.state;
            self.sinks
                .flat
                .retain_mut(|log| match log.write_tick(state, t) {
                    Ok(()) => true,
                    Err(e) => {
                        failed.get_or_insert(e);
                        false
                    }
                });
            if let Some(e) = failed {
                self.output_failed(e);
            }
        }
        let event_like = match f {
            Frame::Companion(c) => c.msg.rule().evaluate_now,
            _ => false,
        };
        let due =
            matches!(f, Frame::Tick(_)) && f.time().saturating_sub(self.last_eval) >= EVAL_EVERY_MS;
        // A process just marked exited: its alerts end now, with the row's `exited`.
        let exited = self.state.exits != exits;
        if (due || event_like || exited) && !self.remote_alerts {
            self.last_eval = f.time();
            let changes = self.alerts.evaluate(&self.state);
            for c in changes {
                self.on_change(c);
            }
            // A process an alert in the panel is about stays listed while the alert does,
            // so Enter on it always finds it (both are bounded).
            self.state.pinned = self.alerts.listed().iter().filter_map(|a| a.pid).collect();
        }
    }

    /// Alerts read from the node's own gpumon, as they stand at `now`.
    pub fn adopt_alerts(&mut self, now: Ts, findings: Vec<crate::model::alerts::Finding>) {
        for c in self.alerts.adopt(now, findings) {
            self.on_change(c);
        }
        self.state.pinned = self.alerts.listed().iter().filter_map(|a| a.pid).collect();
    }

    fn on_change(&mut self, c: AlertChange) {
        if c.wants_bell() {
            self.ring = true;
        }
        if let (Some(min), ChangeKind::Raised | ChangeKind::Worsened) = (self.exit_on, c.change)
            && c.alert.severity >= min
            && self.tripped.is_none()
        {
            self.tripped = Some(c.alert.clone());
        }
        let replayed = c.at <= self.rebuild_until;
        if let (Some(out), false) = (&mut self.sinks.alerts_out, replayed) {
            let line = AlertLine::of(&c).to_line();
            if let Err(e) = out.write_lines(line.as_bytes()) {
                self.sinks.alerts_out = None;
                self.output_failed(e);
            }
        }
        if c.change == ChangeKind::Raised && !replayed {
            self.raised += 1;
        }
        let raised = matches!(c.change, ChangeKind::Raised | ChangeKind::Worsened);
        let frame = Frame::Alert(Box::new(c));
        if let Some(r) = &self.sinks.recorder {
            r.write(&frame);
            // On disk now, not within the second: the process an alert is about
            // may take the machine down with it.
            if raised {
                r.flush();
            }
        }
        self.state.apply(&frame);
    }

    fn output_failed(&mut self, e: std::io::Error) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            self.output_closed = true;
            return;
        }
        self.sink_failed(format!("output stopped: {e}"));
        self.output_failed.get_or_insert(e.to_string());
    }

    /// Whether an output's reader closed it (a broken pipe): not an error, the end.
    pub fn output_closed(&self) -> bool {
        self.output_closed
    }

    /// The first flat or alert log write error, once.
    pub fn take_output_failure(&mut self) -> Option<String> {
        self.output_failed.take()
    }

    /// The recorder's write error, once.
    pub fn take_recording_failure(&mut self) -> Option<String> {
        self.recording_failed.take()
    }

    /// Flush and close the recording; its last write error if that failed.
    pub fn finish_recording(&mut self) -> Option<String> {
        self.sinks.recorder.take().and_then(|r| r.finish())
    }

    fn sink_failed(&mut self, text: String) {
        if !self.sink_error {
            self.sink_error = true;
            let t = self.state.now;
            self.state
                .apply(&Frame::status(t, StatusSource::Output, Level::Error, text));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::flat::FlatFormat;
    use crate::model::sample::{GpuSample, MemInfo, Tick};

    fn tick(t: Ts) -> Frame {
        let mem = MemInfo {
            total: 100,
            used: t as u64,
            free: 1,
            reserved: 0,
        };
        let gpu = GpuSample {
            index: 0,
            mem: Some(mem),
            util: None,
            temp_c: None,
            power_mw: None,
            procs: vec![],
            error: None,
        };
        Frame::Tick(Tick { t, gpus: vec![gpu] })
    }

    #[test]
    fn seeking_back_rebuilds_the_model_without_writing_rows_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rows.csv");
        let log = FlatLog::create(&path, FlatFormat::Csv, "h".into()).expect("log");
        let mut p = Pipeline::new(Sinks {
            flat: vec![log],
            ..Sinks::default()
        });
        for t in 1..=3 {
            p.apply(&tick(t * 1000));
        }
        p.reset();
        for t in 1..=4 {
            p.apply(&tick(t * 1000));
        }
        assert_eq!(p.state.ticks, 4, "the model was rebuilt");
        drop(p);
        let rows = std::fs::read_to_string(&path).expect("csv");
        assert_eq!(
            rows.lines().count(),
            1 + 4,
            "header + one row per tick:\n{rows}"
        );
    }
}
