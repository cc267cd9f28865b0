//! Modes without a terminal: record, serve, headless replay and watch, snapshot.

use crate::cli::{OutputArgs, RecordArgs, ReplayArgs, ServeArgs, WatchArgs};
use crate::model::frame::Frame;
use crate::model::named::StatusSource;
use crate::pipeline::Pipeline;
use crate::record::validate;
use crate::source::event::{Event, NoInput};
use crate::source::replay::Speed;
use crate::source::{nvml, replay};
use anyhow::Result;
use tokio::sync::mpsc::{self, Receiver};

use super::*;

/// Evaluate a recording offline as fast as it can be read: `--alerts-jsonl -` prints
/// the alerts it would have raised, with their time and epoch.
pub(super) async fn replay_headless(r: ReplayArgs, settings: &Settings) -> Result<i32> {
    if !r.follow {
        validate(&r.file)?;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let speed = if r.follow { r.speed } else { Speed::Max };
    let _handle = replay::spawn(
        replay::Options {
            path: r.file.clone(),
            speed,
            follow: r.follow,
            skip_ms: 0,
            looping: false,
            controls: false,
        },
        tx.clone(),
    )?;
    let pipe = pipeline(&r.out, None, &r.filter, settings).await?;
    spawn_signals(tx.clone())?;
    drop(tx);
    Ok(headless(rx, pipe, None, !r.follow).await)
}

/// `gpumon watch --headless`: the live sources into the outputs asked for, no terminal.
pub(super) async fn watch_headless(w: WatchArgs, settings: &Settings) -> Result<i32> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (header, channel) = start_live(w.interval, w.socket_dir.clone(), &tx);
    let header = header.unwrap_or_else(|e| {
        crate::say!("gpumon: {e}; watching companions only");
        header_without_gpus(w.interval)
    });
    check_live_filter(&w.filter, &header.gpus)?;
    let recorder = match &w.record {
        Some(p) => Some(start_recorder(Some(p), &header, w.record_format)?.0),
        None => None,
    };
    let mut pipe = pipeline(&w.out, recorder, &w.filter, settings).await?;
    pipe.apply(&Frame::Header(header));
    spawn_signals(tx.clone())?;
    drop(tx);
    let code = headless(rx, pipe, None, false).await;
    drop(channel);
    Ok(code)
}

pub(super) async fn serve(s: ServeArgs) -> Result<i32> {
    let out = OutputArgs {
        serve: Some(s.listen),
        ..OutputArgs::default()
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let mut pipe = Pipeline::new(sinks(&out, None).await?);
    set_filter(&mut pipe, &s.filter)?;
    let _keep: Box<dyn std::any::Any> = match &s.replay {
        Some(file) => {
            validate(file)?;
            let opts = replay::Options {
                path: file.clone(),
                speed: s.speed,
                follow: false,
                skip_ms: 0,
                looping: false,
                controls: false,
            };
            Box::new(replay::spawn(opts, tx.clone())?)
        }
        None => {
            let (header, channel) = start_live(s.interval, s.socket_dir.clone(), &tx);
            let header = header.unwrap_or_else(|e| {
                crate::say!("gpumon: {e}; serving companion metrics only");
                header_without_gpus(s.interval)
            });
            check_live_filter(&s.filter, &header.gpus)?;
            pipe.apply(&Frame::Header(header));
            Box::new(channel)
        }
    };
    if s.listen.port() != 0 {
        crate::say!("gpumon: serving metrics on http://{}/metrics", s.listen);
    }
    spawn_signals(tx.clone())?;
    drop(tx);
    Ok(headless(rx, pipe, None, false).await)
}

/// Loop without a terminal. Returns the exit status: 3 when `--exit-on-alert` fired.
pub(super) async fn headless(
    mut rx: Receiver<Event<NoInput>>,
    mut pipe: Pipeline,
    deadline: Option<tokio::time::Instant>,
    stop_at_replay_end: bool,
) -> i32 {
    loop {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let ev = tokio::select! {
            ev = rx.recv() => ev,
            () = sleep => None,
        };
        let mut next = ev;
        let mut stop = next.is_none();
        while let Some(ev) = next.take() {
            match ev {
                Event::Frame(f) => {
                    // Headless has no status line: what the replay says about its file
                    // (replaced, unreadable, corrupt) goes to stderr, and a replay that
                    // stopped on an error stops gpumon with an error.
                    if let Frame::Status {
                        source,
                        level,
                        text,
                        ..
                    } = &f
                        && *source == StatusSource::Replay
                    {
                        // The text may quote the file: no control characters reach the terminal.
                        let text: String = text.chars().filter(|c| !c.is_control()).collect();
                        crate::say!("gpumon: {text}");
                        if *level == crate::model::frame::Level::Error {
                            return 1;
                        }
                    }
                    pipe.apply(&f);
                    for n in pipe.take_notices() {
                        crate::say!("gpumon: {n}");
                    }
                }
                Event::Reset => pipe.reset(),
                Event::Replay(s) if stop_at_replay_end && s.ended => stop = true,
                Event::Quit(reason) => {
                    crate::say!("gpumon: {reason}");
                    stop = true;
                }
                _ => {}
            }
            next = rx.try_recv().ok();
        }
        pipe.publish();
        if let Some(e) = pipe.take_recording_failure() {
            crate::say!("gpumon: recording stopped: {e}");
            return 1;
        }
        if let Some(e) = pipe.take_output_failure() {
            crate::say!("gpumon: output stopped: {e}");
            return 1;
        }
        if let Some(code) = alert_exit(&pipe) {
            return code;
        }
        if stop {
            if let Some(e) = pipe.finish_recording() {
                crate::say!("gpumon: recording stopped: {e}");
                return 1;
            }
            return 0;
        }
    }
}

pub(super) async fn record(r: RecordArgs, settings: &Settings) -> Result<i32> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (header, channel) = start_live(r.interval, r.socket_dir.clone(), &tx);
    let header = header.unwrap_or_else(|e| {
        crate::say!("gpumon: {e}; recording companions only");
        header_without_gpus(r.interval)
    });
    check_live_filter(&r.filter, &header.gpus)?;
    let (recorder, output) = start_recorder(r.output.as_deref(), &header, r.format)?;
    let out = OutputArgs {
        csv: r.csv.clone(),
        jsonl: r.jsonl.clone(),
        ..OutputArgs::default()
    };
    let mut pipe = Pipeline::new(sinks(&out, Some(recorder)).await?);
    set_filter(&mut pipe, &r.filter)?;
    pipe.apply(&Frame::Header(header.clone()));
    crate::say!(
        "gpumon: recording {} GPU(s) every {} ms to {}{}",
        header.gpus.len(),
        r.interval.as_millis(),
        output.display(),
        r.duration
            .map(|d| format!(" for {} s", d.as_secs_f64()))
            .unwrap_or_else(|| " until interrupted".into())
    );
    spawn_signals(tx.clone())?;
    drop(tx);
    let deadline = r.duration.map(|d| tokio::time::Instant::now() + d);
    let code = headless(rx, pipe, deadline, false).await;
    drop(channel);
    // The recording is closed (also after SIGINT/SIGTERM, which end the loop): tell it.
    if let Some(out) = r.report.clone() {
        let file = output.clone();
        let settings = settings.clone();
        let done = tokio::task::spawn_blocking(move || {
            super::report::write_report(
                &file,
                Some(&out),
                crate::report::Format::Html,
                None,
                &settings,
            )
        })
        .await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("gpumon: no report: {e:#}");
                return Ok(if code == 0 { 1 } else { code });
            }
            Err(e) => {
                eprintln!("gpumon: no report: {e}");
                return Ok(if code == 0 { 1 } else { code });
            }
        }
    }
    Ok(code)
}

pub(super) fn snapshot() -> Result<i32> {
    let (header, tick, procs) = match nvml::snapshot() {
        Ok(v) => v,
        Err(e) => {
            crate::say!("gpumon: {e}");
            return Ok(crate::cli::exit::NO_GPU);
        }
    };
    let mut state = crate::model::state::State::default();
    state.apply(&Frame::Header(header));
    state.apply(&Frame::Procs { t: tick.t, procs });
    state.apply(&Frame::Tick(tick));
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::export::json::to_json(&state))?
    );
    Ok(0)
}
