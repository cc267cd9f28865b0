//! Wiring: which sources run, the one event loop, and the headless modes.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use tokio::sync::mpsc::{self, Receiver, Sender};

use std::net::SocketAddr;
use std::sync::Arc;

use crate::app::{App, Effect, SourceKind};
use crate::channel::ChannelHandle;
use crate::cli::{
    Cli, Command, DisplayArgs, OutputArgs, RecordArgs, ReplayArgs, ServeArgs, WatchArgs,
};
use crate::event::{Event, Speed};
use crate::export::Exporter;
use crate::export::flat::{FlatFormat, FlatLog};
use crate::export::http::{Limits, serve_on};
use crate::frame::Frame;
use crate::model::alerts::config::AlertConfig;
use crate::model::alerts::engine::AlertEngine;
use crate::model::time::now_ms;
use crate::pipeline::{Pipeline, Sinks};
use crate::record::{Recorder, validate};
use crate::source::{nvml, replay};
use crate::term::TerminalGuard;
use crate::ui::theme::Theme;

/// Events queued between sources and the loop; sources wait (NVML, replay) when it is full.
const QUEUE: usize = 1024;
/// Redraw caps: after a key, and after new data only.
const INPUT_FRAME: Duration = Duration::from_millis(16);
const DATA_FRAME: Duration = Duration::from_millis(250);

/// Where the bundled recording of a real H200 run lives.
pub fn demo_path() -> Option<PathBuf> {
    let name = "demo.gpumon.jsonl";
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("GPUMON_DEMO") {
        candidates.push(PathBuf::from(p));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("../share/gpumon").join(name));
            candidates.push(dir.join("../../assets").join(name));
        }
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(name),
    );
    candidates.into_iter().find(|p| p.is_file())
}

pub fn main_entry(cli: Cli) -> Result<i32> {
    if let Some(Command::Run { cmd }) = &cli.command {
        return crate::run_cmd::run(cmd);
    }
    if let Some(Command::Snapshot(_)) = &cli.command {
        return snapshot();
    }
    // One thread runs the loop and the channel/HTTP tasks; samplers have their own threads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        match cli.command {
            None => watch(cli.watch).await,
            Some(Command::Watch(w)) => watch(w).await,
            Some(Command::Replay(r)) if r.out.headless => replay_headless(r).await,
            Some(Command::Replay(r)) => replay_tui(r, false, None).await,
            Some(Command::Demo(d)) => {
                let file = demo_path()
                    .context("the bundled recording assets/demo.gpumon.jsonl is missing")?;
                let args = ReplayArgs {
                    file,
                    speed: Speed::Times(1.0),
                    follow: false,
                    out: OutputArgs::default(),
                    display: d,
                };
                replay_tui(args, true, None).await
            }
            Some(Command::Record(r)) => record(r).await,
            Some(Command::Serve(s)) => serve(s).await,
            Some(Command::Snapshot(_)) | Some(Command::Run { .. }) => Ok(0),
        }
    })
}

fn theme(d: &DisplayArgs) -> Theme {
    Theme::detect(d.ascii, d.no_color)
}

/// Build the outputs named on the command line. The HTTP listener is bound here so a
/// busy port is an immediate, clear error.
async fn sinks(out: &OutputArgs, recorder: Option<Recorder>) -> Result<Sinks> {
    let host = nvml::hostname();
    let mut s = Sinks {
        recorder,
        ..Sinks::default()
    };
    if let Some(addr) = out.serve {
        s.exporter = Some(start_exporter(addr, &host).await?);
    }
    if let Some(p) = &out.csv {
        let log = FlatLog::create(p, FlatFormat::Csv, host.clone())
            .with_context(|| format!("cannot write {}", p.display()))?;
        s.flat.push(log);
    }
    if let Some(p) = &out.jsonl {
        let log = FlatLog::create(p, FlatFormat::Jsonl, host.clone())
            .with_context(|| format!("cannot write {}", p.display()))?;
        s.flat.push(log);
    }
    if let Some(p) = &out.alerts_jsonl {
        s.alerts_out = Some(if p.as_os_str() == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(
                std::fs::File::create(p)
                    .with_context(|| format!("cannot write {}", p.display()))?,
            )
        });
    }
    Ok(s)
}

/// Alert thresholds (`--alerts-config FILE`, JSON, missing fields keep their defaults) and
/// `--exit-on-alert`.
fn configure(pipe: &mut Pipeline, out: &OutputArgs) -> Result<()> {
    pipe.exit_on = out.exit_on_alert;
    if let Some(p) = &out.alerts_config {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("cannot read alert configuration {}", p.display()))?;
        let cfg: AlertConfig = serde_json::from_str(&text)
            .with_context(|| format!("invalid alert configuration {}", p.display()))?;
        pipe.alerts = AlertEngine::new(cfg);
    }
    Ok(())
}

async fn start_exporter(addr: SocketAddr, host: &str) -> Result<Arc<Exporter>> {
    let exporter = Arc::new(Exporter::new(host.to_string()));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let e = Arc::clone(&exporter);
    tokio::spawn(async move {
        if let Err(err) = serve_on(e, listener, Limits::default()).await {
            eprintln!("gpumon: metrics endpoint stopped: {err}");
        }
    });
    Ok(exporter)
}

/// Live sources: NVML (when there is a driver) and the companion channel (always).
/// Returns the header, or why NVML is unavailable, plus the channel handle to keep alive.
fn start_live(
    interval: Duration,
    socket_dir: Option<PathBuf>,
    tx: &Sender<Event>,
) -> (
    Result<crate::frame::Header, nvml::NvmlUnavailable>,
    ChannelHandle,
) {
    let (ftx, frx) = mpsc::channel::<Frame>(QUEUE);
    let header = nvml::spawn(interval, ftx.clone());
    let channel = crate::channel::spawn(socket_dir, ftx);
    forward(frx, tx.clone());
    (header, channel)
}

/// A header for runs without NVML: companions are still served and recorded.
fn header_without_gpus(interval: Duration) -> crate::frame::Header {
    crate::frame::Header {
        v: crate::frame::FORMAT_VERSION,
        format: "gpumon".into(),
        host: nvml::hostname(),
        driver_version: None,
        nvml_version: None,
        cuda_version: None,
        started: now_ms(),
        interval_ms: interval.as_millis() as u64,
        gpus: vec![],
        gpumon_version: env!("CARGO_PKG_VERSION").into(),
    }
}

async fn watch(w: WatchArgs) -> Result<i32> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (header, channel) = start_live(w.interval, w.socket_dir.clone(), &tx);
    let mut notice = None;
    let header = match header {
        Ok(h) => h,
        Err(e) if w.out.headless => {
            eprintln!("gpumon: {e}; watching companions only");
            header_without_gpus(w.interval)
        }
        Err(e) if companions_waiting(w.socket_dir.as_deref()) => {
            // No driver here, but instrumented processes are: show them rather than the demo.
            eprintln!("gpumon: {e}; showing the companions that are running");
            notice = Some(format!("{e}: companions only"));
            header_without_gpus(w.interval)
        }
        Err(e) => {
            drop(channel);
            if let Some(p) = &w.record {
                anyhow::bail!(
                    "{e}; nothing to record to {} (use `gpumon record` to record companions)",
                    p.display()
                );
            }
            let Some(file) = demo_path() else {
                anyhow::bail!("{e}; and the bundled demo recording is missing");
            };
            eprintln!("gpumon: {e} -- showing the bundled recording of a real H200 run instead");
            let notice = format!("{e}: playing the bundled recording");
            let args = ReplayArgs {
                file,
                speed: Speed::Times(1.0),
                follow: false,
                out: w.out,
                display: w.display,
            };
            return replay_tui(args, true, Some(notice)).await;
        }
    };
    let recorder = match &w.record {
        Some(p) => Some(Recorder::create(p, &header)?),
        None => None,
    };
    let mut pipe = Pipeline::new(sinks(&w.out, recorder).await?);
    configure(&mut pipe, &w.out)?;
    if w.out.headless {
        pipe.apply(&Frame::Header(header));
        spawn_signals(tx.clone())?;
        drop(tx);
        let code = headless(rx, pipe, None, false).await;
        drop(channel);
        return Ok(code);
    }
    let mut app = App::new(
        SourceKind::Live {
            interval_ms: w.interval.as_millis() as u64,
        },
        pipe.sinks,
    );
    configure(&mut app.pipe, &w.out)?;
    app.bell = w.out.bell;
    app.notice = notice;
    app.apply(&Frame::Header(header));
    let code = run_tui(app, tx, rx, theme(&w.display), None).await;
    drop(channel);
    code
}

/// Whether any companion or interposer socket exists where the channel looks.
fn companions_waiting(dir: Option<&Path>) -> bool {
    let dirs = match dir {
        Some(d) => vec![d.to_path_buf()],
        None => crate::channel::dirs::scan_dirs(),
    };
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .any(|e| crate::channel::dirs::sock_pid(&e.file_name()).is_some())
}

/// NVML and channel frames are plain frames; wrap them into loop events.
fn forward(mut frx: Receiver<Frame>, tx: Sender<Event>) {
    tokio::spawn(async move {
        while let Some(f) = frx.recv().await {
            if tx.send(Event::Frame(f)).await.is_err() {
                break;
            }
        }
    });
}

async fn replay_tui(r: ReplayArgs, demo: bool, notice: Option<String>) -> Result<i32> {
    if !r.follow {
        validate(&r.file)?;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let handle = replay::spawn(
        replay::Options {
            path: r.file.clone(),
            speed: r.speed,
            follow: r.follow,
            skip_ms: if demo { 40_000 } else { 0 },
        },
        tx.clone(),
    )?;
    let mut app = App::new(
        SourceKind::Replay {
            file: r.file.display().to_string(),
            demo,
        },
        sinks(&r.out, None).await?,
    );
    configure(&mut app.pipe, &r.out)?;
    app.bell = r.out.bell;
    app.notice = notice;
    run_tui(app, tx, rx, theme(&r.display), Some(handle)).await
}

/// Evaluate a recording offline as fast as it can be read: `--alerts-jsonl -` prints
/// the alerts it would have raised, with their time and epoch.
async fn replay_headless(r: ReplayArgs) -> Result<i32> {
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
        },
        tx.clone(),
    )?;
    let mut pipe = Pipeline::new(sinks(&r.out, None).await?);
    configure(&mut pipe, &r.out)?;
    spawn_signals(tx.clone())?;
    drop(tx);
    Ok(headless(rx, pipe, None, !r.follow).await)
}

async fn serve(s: ServeArgs) -> Result<i32> {
    let out = OutputArgs {
        serve: Some(s.listen),
        ..OutputArgs::default()
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let mut pipe = Pipeline::new(sinks(&out, None).await?);
    let _keep: Box<dyn std::any::Any> = match &s.replay {
        Some(file) => {
            validate(file)?;
            let opts = replay::Options {
                path: file.clone(),
                speed: s.speed,
                follow: false,
                skip_ms: 0,
            };
            Box::new(replay::spawn(opts, tx.clone())?)
        }
        None => {
            let (header, channel) = start_live(s.interval, s.socket_dir.clone(), &tx);
            let header = header.unwrap_or_else(|e| {
                eprintln!("gpumon: {e}; serving companion metrics only");
                header_without_gpus(s.interval)
            });
            pipe.apply(&Frame::Header(header));
            Box::new(channel)
        }
    };
    eprintln!("gpumon: serving metrics on http://{}/metrics", s.listen);
    spawn_signals(tx.clone())?;
    drop(tx);
    Ok(headless(rx, pipe, None, false).await)
}

/// Loop without a terminal. Returns the exit status: 3 when `--exit-on-alert` fired.
async fn headless(
    mut rx: Receiver<Event>,
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
                Event::Frame(f) => pipe.apply(&f),
                Event::Reset => pipe.reset(),
                Event::Replay(s) if stop_at_replay_end && s.ended => stop = true,
                Event::Quit(reason) => {
                    eprintln!("gpumon: {reason}");
                    stop = true;
                }
                _ => {}
            }
            next = rx.try_recv().ok();
        }
        pipe.publish();
        if let Some(a) = &pipe.tripped {
            eprintln!(
                "gpumon: alert fired ({}): {}",
                a.severity.label(),
                a.message
            );
            return 3;
        }
        if stop {
            return 0;
        }
    }
}

async fn run_tui(
    mut app: App,
    tx: Sender<Event>,
    mut rx: Receiver<Event>,
    theme: Theme,
    replay: Option<replay::ReplayHandle>,
) -> Result<i32> {
    let guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    spawn_input(tx.clone());
    spawn_signals(tx.clone())?;
    drop(tx);
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    // No terminal.clear(): it asks the terminal for the cursor position, which pseudo-terminals
    // of some harnesses and multiplexers never answer; the alternate screen starts blank anyway.
    let result = event_loop(&mut terminal, &mut app, &mut rx, &theme, replay.as_ref()).await;
    drop(guard);
    if let Some(reason) = &app.quit_reason {
        eprintln!("gpumon: {reason}");
    }
    if let Some(a) = &app.pipe.tripped {
        eprintln!(
            "gpumon: alert fired ({}): {}",
            a.severity.label(),
            a.message
        );
        return result.map(|()| 3);
    }
    result.map(|()| 0)
}

/// The one loop: apply every queued event, then draw only when something changed. Keys are
/// answered within one `INPUT_FRAME`; data alone redraws at most every `DATA_FRAME`, so fast
/// sampling or a fast replay does not turn into a redraw storm.
pub async fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &mut Receiver<Event>,
    theme: &Theme,
    replay: Option<&replay::ReplayHandle>,
) -> Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let mut dirty: Option<Duration> = Some(Duration::ZERO);
    let mut last_draw = Instant::now();
    loop {
        if let Some(cap) = dirty {
            let wait = cap.saturating_sub(last_draw.elapsed());
            if wait.is_zero() {
                terminal.draw(|f| crate::ui::draw(f, app, theme))?;
                last_draw = Instant::now();
                dirty = None;
            }
        }
        let wait = match dirty {
            Some(cap) => cap.saturating_sub(last_draw.elapsed()),
            None => Duration::from_secs(3600),
        };
        let first = tokio::select! {
            ev = rx.recv() => ev,
            () = tokio::time::sleep(wait) => continue,
        };
        let Some(first) = first else { return Ok(()) };
        let mut next = Some(first);
        let batch = Instant::now();
        while let Some(ev) = next {
            let cap = match ev {
                Event::Key(_) | Event::Resize => INPUT_FRAME,
                _ => DATA_FRAME,
            };
            dirty = Some(dirty.map_or(cap, |d| d.min(cap)));
            match app.update(ev) {
                Some(Effect::Quit) => return Ok(()),
                Some(Effect::Replay(c)) => {
                    if let Some(h) = replay {
                        let _ = h.control.send(c);
                    }
                }
                Some(Effect::Bell) => {
                    use std::io::Write;
                    let _ = io::stdout().write_all(b"\x07");
                }
                None => {}
            }
            // A fast replay can keep the queue full; still draw now and then.
            next = if batch.elapsed() < INPUT_FRAME {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        app.pipe.publish();
    }
}

fn spawn_input(tx: Sender<Event>) {
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            use crossterm::event::{self, Event as CEvent, KeyEventKind};
            loop {
                if tx.is_closed() {
                    return;
                }
                match event::poll(Duration::from_millis(200)) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => {
                        let _ =
                            tx.blocking_send(Event::Quit(format!("terminal input failed: {e}")));
                        return;
                    }
                }
                let ev = match event::read() {
                    Ok(CEvent::Key(k)) if k.kind != KeyEventKind::Release => Event::Key(k),
                    Ok(CEvent::Resize(..)) => Event::Resize,
                    Ok(_) => continue,
                    Err(e) => Event::Quit(format!("terminal input failed: {e}")),
                };
                let quit = matches!(ev, Event::Quit(_));
                if tx.blocking_send(ev).is_err() || quit {
                    return;
                }
            }
        })
        .ok();
}

fn spawn_signals(tx: Sender<Event>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT])
        .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut asked = false;
            for sig in signals.forever() {
                if asked {
                    // The loop did not stop after the first signal (stuck writing to a dead
                    // terminal?): restore what can be restored and leave now.
                    crate::term::restore();
                    std::process::exit(128 + sig);
                }
                asked = true;
                let name = match sig {
                    SIGHUP => "SIGHUP (terminal hung up)",
                    SIGTERM => "SIGTERM",
                    _ => "SIGINT",
                };
                if tx
                    .try_send(Event::Quit(format!("stopped by {name}")))
                    .is_err()
                {
                    // The loop is gone or drowning in events: do not wait for it.
                    crate::term::restore();
                    std::process::exit(128 + sig);
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

async fn record(r: RecordArgs) -> Result<i32> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (header, channel) = start_live(r.interval, r.socket_dir.clone(), &tx);
    let header = header.unwrap_or_else(|e| {
        eprintln!("gpumon: {e}; recording companions only");
        header_without_gpus(r.interval)
    });
    let recorder = Recorder::create(&r.output, &header)?;
    let out = OutputArgs {
        csv: r.csv.clone(),
        jsonl: r.jsonl.clone(),
        ..OutputArgs::default()
    };
    let mut pipe = Pipeline::new(sinks(&out, Some(recorder)).await?);
    pipe.apply(&Frame::Header(header.clone()));
    eprintln!(
        "gpumon: recording {} GPU(s) every {} ms to {}{}",
        header.gpus.len(),
        r.interval.as_millis(),
        r.output.display(),
        r.duration
            .map(|s| format!(" for {s} s"))
            .unwrap_or_else(|| " until interrupted".into())
    );
    spawn_signals(tx.clone())?;
    drop(tx);
    let deadline = r
        .duration
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let code = headless(rx, pipe, deadline, false).await;
    drop(channel);
    Ok(code)
}

fn snapshot() -> Result<i32> {
    let (header, tick, procs) = match nvml::snapshot() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("gpumon: {e}");
            return Ok(2);
        }
    };
    let mut state = crate::model::state::State::default();
    state.apply(&Frame::Header(header));
    state.apply(&Frame::Procs { t: tick.t, procs });
    state.apply(&Frame::Tick(tick));
    println!(
        "{}",
        serde_json::to_string_pretty(&crate::snapshot::to_json(&state))?
    );
    Ok(0)
}
