//! The report's replay: the recording played by `source::replay` at full speed, each
//! frame through `Pipeline::apply` (model and alerts, as every mode), then shown to the
//! collector. Replay is just another source: no second reader, no second alert engine.

use std::path::Path;

use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::pipeline::Pipeline;
use crate::report::alerts::Capture;
use crate::report::collect::{Collector, Run};
use crate::source::replay::{self, ReplayEvent, Speed};

/// Frames queued between the replay thread and the report.
const QUEUE: usize = 4096;
/// Frames taken from the queue at once.
const BATCH: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Recording(#[from] crate::record::RecordingError),
    #[error("{0}")]
    Replay(String),
    #[error("{0}: no header: not a gpumon recording")]
    NoHeader(String),
}

/// Play `path` through `pipe` (configured by the caller: alert thresholds) and gather the run.
/// Must not be called from inside an async runtime (it waits on the replay thread).
pub fn replay_run(path: &Path, mut pipe: Pipeline) -> Result<Run, ReportError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ReplayEvent>(QUEUE);
    let handle = replay::spawn(
        replay::Options {
            path: path.to_path_buf(),
            speed: Speed::Max,
            follow: false,
            open_at: replay::OpenAt::Start,
            looping: false,
            controls: false,
            strict: false,
        },
        tx,
    )?;
    let capture = Capture::default();
    pipe.sinks.alerts_out = Some(crate::export::line_file::LineFile::new(
        Box::new(capture.clone()),
        "the report's alert capture",
    ));
    let file = path.display().to_string();
    let mut collector: Option<Collector> = None;
    let mut ended = false;
    // Taken in batches: each receive frees the replay thread's slots at once, so it is woken
    // once a batch instead of once a frame (776,758 wake-ups for a 24-hour recording).
    let mut batch = Vec::with_capacity(BATCH);
    'feed: while rx.blocking_recv_many(&mut batch, BATCH) > 0 {
        for ev in batch.drain(..) {
            match ev {
                ReplayEvent::Frame(f) => {
                    if let Frame::Status {
                        source: StatusSource::Replay,
                        level: Level::Error,
                        text,
                        ..
                    } = &f
                    {
                        return Err(ReportError::Replay(text.clone()));
                    }
                    // Corrupt lines skipped, an unclosed tail: the page is told from what was read.
                    if let Frame::Status {
                        source: StatusSource::Replay,
                        level: Level::Warn,
                        text,
                        ..
                    } = &f
                    {
                        crate::say!("gpumon: {text}");
                    }
                    // Outside the run's time (a tick at t = i64::MAX): counted, not applied.
                    if let Some(c) = &mut collector
                        && !c.admits_time(f.time())
                    {
                        continue;
                    }
                    pipe.apply(&f);
                    if let Frame::Header(h) = &f
                        && collector.is_none()
                    {
                        collector = Some(Collector::new(file.clone(), h));
                    }
                    if let Some(c) = &mut collector {
                        c.observe(&f, &pipe.state);
                    }
                }
                ReplayEvent::Status(s) if s.ended => {
                    ended = true;
                    break 'feed;
                }
                ReplayEvent::Status(_) | ReplayEvent::Reset => {}
            }
        }
    }
    // The replay thread waits for controls at the end; without us it stops.
    drop(handle);
    drop(rx);
    if !ended {
        return Err(ReportError::Replay(format!(
            "{file}: the replay stopped before the end of the recording"
        )));
    }
    let collector = collector.ok_or_else(|| ReportError::NoHeader(file.clone()))?;
    // Alerts still open at the end stay open: the page says so; nothing is flushed here.
    drop(pipe.sinks.alerts_out.take());
    let alerts = capture.lines().map_err(ReportError::Replay)?;
    let run = collector.finish(alerts);
    for line in run.dropped.lines() {
        crate::say!("gpumon: {file}: {line}");
    }
    Ok(run)
}
