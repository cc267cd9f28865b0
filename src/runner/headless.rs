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

/// Evaluate a recording offline, as fast as it can be read unless `--speed` says otherwise
/// (honoured: at 1 it plays in real time, e.g. to feed `--serve` like a live job):
/// `--alerts-jsonl -` prints the alerts it would have raised, with their time and epoch.
/// Asked for no output, it ends with one line saying what it played and found.
pub(super) async fn replay_headless(r: ReplayArgs, settings: &Settings) -> Result<i32> {
    if !r.follow {
        validate(&r.file, r.strict)?;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let _handle = replay::spawn(
        replay::Options {
            path: r.file.clone(),
            speed: r.speed.unwrap_or(Speed::Max),
            follow: r.follow,
            skip_ms: 0,
            looping: false,
            controls: false,
            strict: r.strict,
        },
        tx.clone(),
    )?;
    let pipe = pipeline(&r.out, None, &r.filter, settings).await?;
    spawn_signals(tx.clone())?;
    drop(tx);
    let o = &r.out;
    let silent =
        o.serve.is_none() && o.csv.is_none() && o.jsonl.is_none() && o.alerts_jsonl.is_none();
    let mut seen = Seen::default();
    let code = headless(rx, pipe, None, !r.follow, Some(&mut seen)).await;
    if silent && code == 0 {
        println!("{}", seen.summary(&r.file.display().to_string()));
    }
    Ok(code)
}

/// What a headless replay went through: frames, their time span, the GPUs and processes
/// the model kept (after `--gpu/--user/--pid`), and the alerts raised.
#[derive(Debug, Default)]
pub(super) struct Seen {
    frames: u64,
    first: Option<crate::model::time::Ts>,
    last: crate::model::time::Ts,
    gpus: usize,
    pids: std::collections::BTreeSet<u32>,
    raised: u64,
}

impl Seen {
    fn frame(&mut self, f: &Frame) {
        if matches!(f, Frame::Status { .. } | Frame::Header(_)) {
            return;
        }
        self.frames += 1;
        let t = f.time();
        self.first = Some(self.first.map_or(t, |a| a.min(t)));
        self.last = self.last.max(t);
    }

    fn model(&mut self, pipe: &Pipeline) {
        self.gpus = self.gpus.max(pipe.state.gpus.len());
        // GPU processes: /proc facts alone (a process the filter left without a GPU) are not.
        let on_gpu = pipe.state.procs.iter().filter(|(_, p)| !p.gpus.is_empty());
        self.pids.extend(on_gpu.map(|(pid, _)| *pid));
        self.raised = pipe.raised;
    }

    /// `replayed F: 1234 frames over 5m12s, 2 GPUs, 7 processes, 3 alerts raised (...)`.
    pub(super) fn summary(&self, file: &str) -> String {
        let span = self.first.map_or(0, |a| self.last - a);
        let n =
            |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        let alerts = match self.raised {
            0 => "no alert raised".to_string(),
            k => format!(
                "{} (--alerts-jsonl - lists them)",
                n(k as usize, "alert raised", "alerts raised")
            ),
        };
        format!(
            "gpumon: replayed {file}: {} over {}, {}, {}, {alerts}",
            n(self.frames as usize, "frame", "frames"),
            span_words(span),
            n(self.gpus, "GPU", "GPUs"),
            n(self.pids.len(), "process", "processes"),
        )
    }
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
    let code = headless(rx, pipe, None, false, None).await;
    drop(channel);
    Ok(code)
}

pub(super) async fn serve(s: ServeArgs) -> Result<i32> {
    let out = OutputArgs {
        serve: Some(s.listen),
        web_config_file: s.web_config_file.clone(),
        node: s.node.clone(),
        ..OutputArgs::default()
    };
    // Read here for the line below too; `sinks` reads it again for the endpoint (cheap).
    let web = web_config(s.web_config_file.as_deref())?;
    let (tls, auth) = (web.tls.is_some(), web.needs_auth());
    let (tx, rx) = mpsc::channel(QUEUE);
    let mut pipe = Pipeline::new(sinks(&out, None).await?);
    set_filter(&mut pipe, &s.filter)?;
    let _keep: Box<dyn std::any::Any> = match &s.replay {
        Some(file) => {
            validate(file, false)?;
            let opts = replay::Options {
                path: file.clone(),
                speed: s.speed,
                follow: false,
                skip_ms: 0,
                looping: false,
                controls: false,
                strict: false,
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
        crate::say_info!(
            "gpumon: serving metrics on {}://{}/metrics{}",
            if tls { "https" } else { "http" },
            s.listen,
            if auth { " (basic auth)" } else { "" }
        );
    }
    spawn_signals(tx.clone())?;
    drop(tx);
    Ok(headless(rx, pipe, None, false, None).await)
}

/// Loop without a terminal. Returns the exit status: 3 when `--exit-on-alert` fired.
pub(super) async fn headless(
    mut rx: Receiver<Event<NoInput>>,
    mut pipe: Pipeline,
    deadline: Option<tokio::time::Instant>,
    stop_at_replay_end: bool,
    mut seen: Option<&mut Seen>,
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
                    if let Some(s) = seen.as_deref_mut() {
                        s.frame(&f);
                    }
                    for n in pipe.take_notices() {
                        crate::say!("gpumon: {n}");
                    }
                }
                Event::Reset => pipe.reset(),
                Event::Replay(s) if stop_at_replay_end && s.ended => stop = true,
                Event::Quit(reason) => {
                    crate::say_info!("gpumon: {reason}");
                    stop = true;
                }
                _ => {}
            }
            next = rx.try_recv().ok();
        }
        // Once per batch, not per frame: exited processes stay in the model for a while.
        if let Some(s) = seen.as_deref_mut() {
            s.model(&pipe);
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
        // The reader of an output went away (`| head -1`): it has what it wanted.
        stop |= pipe.output_closed();
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
    // A path that cannot be written is found before the driver is asked (and before it
    // says anything): the job fails on what the user typed, not on what NVML answered.
    if let Some(p) = &r.output {
        check_writable(p, "recording")?;
    }
    for p in [&r.csv, &r.jsonl, &r.report].into_iter().flatten() {
        check_writable(p, "output")?;
    }
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
    crate::say_info!(
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
    let code = headless(rx, pipe, deadline, false, None).await;
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

/// A replay's length to the second below an hour (`2m05s`), as `fmt::duration` above.
fn span_words(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => crate::fmt::duration(ms),
    }
}

/// Whether `path` can be created or written, without creating it (a run refused later, by
/// its filter, leaves nothing behind): its directory exists and is writable, or the file
/// itself is.
pub(super) fn check_writable(path: &std::path::Path, what: &str) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let show = path.display();
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let (probe, mode) = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => anyhow::bail!("cannot write {what} {show}: it is a directory"),
        Ok(_) => (path, libc::W_OK),
        Err(_) => match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => (dir, libc::W_OK | libc::X_OK),
            Ok(_) => anyhow::bail!(
                "cannot write {what} {show}: {} is not a directory",
                dir.display()
            ),
            Err(e) => anyhow::bail!(
                "cannot write {what} {show}: directory {}: {e}",
                dir.display()
            ),
        },
    };
    let c = std::ffi::CString::new(probe.as_os_str().as_bytes())
        .map_err(|_| anyhow::anyhow!("cannot write {what} {show}: NUL in the path"))?;
    // SAFETY: a valid NUL-terminated path; access(2) only reads it.
    if unsafe { libc::access(c.as_ptr(), mode) } != 0 {
        let e = std::io::Error::last_os_error();
        anyhow::bail!("cannot write {what} {show}: {}: {e}", probe.display());
    }
    Ok(())
}

/// `gpumon snapshot`: a table for a person, JSON for a script (`SnapshotArgs::format`).
pub(super) fn snapshot(args: &crate::cli::SnapshotArgs) -> Result<i32> {
    use std::io::IsTerminal;
    let format = args.format(std::io::stdout().is_terminal());
    let (header, tick, procs) = match nvml::snapshot() {
        Ok(v) => v,
        Err(e) => {
            crate::say!("gpumon: {e}");
            // A script reading the JSON gets the error as JSON too, not an empty stdout.
            if format == crate::cli::SnapshotFormat::Json {
                let err = serde_json::json!({
                    "error": e.to_string(),
                    "exit_code": crate::cli::exit::NO_GPU,
                    "gpus": [],
                });
                let _ = super::print_all((serde_json::to_string(&err)? + "\n").as_bytes());
            }
            return Ok(crate::cli::exit::NO_GPU);
        }
    };
    let mut state = crate::model::state::State::default();
    state.apply(&Frame::Header(header));
    state.apply(&Frame::Procs { t: tick.t, procs });
    state.apply(&Frame::Tick(tick));
    let text = match format {
        crate::cli::SnapshotFormat::Json => {
            serde_json::to_string_pretty(&crate::export::json::to_json(&state))? + "\n"
        }
        crate::cli::SnapshotFormat::Table => crate::export::snapshot_table::table(&state),
    };
    super::print_all(text.as_bytes())
}
