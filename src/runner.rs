//! Wiring: which sources run, the one event loop, and the headless modes.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use tokio::sync::mpsc::{self, Receiver, Sender};

use crate::app::{App, Effect, SourceKind};
use crate::cli::{Cli, Command, DisplayArgs, RecordArgs, ReplayArgs, WatchArgs};
use crate::event::{Event, Speed};
use crate::frame::Frame;
use crate::record::{Recorder, validate};
use crate::source::{nvml, replay};
use crate::term::TerminalGuard;
use crate::ui::theme::Theme;

/// Events queued between sources and the loop; sources wait (NVML, replay) when it is full.
const QUEUE: usize = 1024;
/// Frame-rate cap: at most one draw per this interval.
const MIN_FRAME: Duration = Duration::from_millis(33);

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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("gpumon-rt")
        .build()
        .context("cannot start the async runtime")?;
    match cli.command {
        None => rt.block_on(watch(cli.watch)),
        Some(Command::Watch(w)) => rt.block_on(watch(w)),
        Some(Command::Replay(r)) => rt.block_on(replay_tui(r, false)),
        Some(Command::Demo(d)) => {
            let file =
                demo_path().context("the bundled recording assets/demo.gpumon.jsonl is missing")?;
            rt.block_on(replay_tui(
                ReplayArgs {
                    file,
                    speed: Speed::Times(1.0),
                    follow: false,
                    display: d,
                },
                true,
            ))
        }
        Some(Command::Record(r)) => rt.block_on(record(r)),
        Some(Command::Snapshot(_)) => snapshot(),
    }
}

fn theme(d: &DisplayArgs) -> Theme {
    Theme::detect(d.ascii, d.no_color)
}

async fn watch(w: WatchArgs) -> Result<i32> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (ftx, frx) = mpsc::channel::<Frame>(QUEUE);
    match nvml::spawn(w.interval, ftx) {
        Ok(header) => {
            forward(frx, tx.clone());
            let mut app = App::new(SourceKind::Live {
                interval_ms: w.interval.as_millis() as u64,
            });
            let first = Frame::Header(header.clone());
            let recorder = match &w.record {
                Some(p) => Some(Recorder::create(p, &header)?),
                None => None,
            };
            app.apply(&first);
            run_tui(app, tx, rx, theme(&w.display), recorder, None).await
        }
        Err(e) => {
            let Some(file) = demo_path() else {
                anyhow::bail!("{e}; and the bundled demo recording is missing");
            };
            eprintln!("gpumon: {e} -- showing the bundled recording of a real H200 run instead");
            let notice = format!("{e}: playing the bundled recording");
            let args = ReplayArgs {
                file,
                speed: Speed::Times(1.0),
                follow: false,
                display: w.display,
            };
            replay_tui_with(args, true, Some(notice)).await
        }
    }
}

/// NVML frames are plain frames; wrap them into loop events.
fn forward(mut frx: Receiver<Frame>, tx: Sender<Event>) {
    tokio::spawn(async move {
        while let Some(f) = frx.recv().await {
            if tx.send(Event::Frame(f)).await.is_err() {
                break;
            }
        }
    });
}

async fn replay_tui(r: ReplayArgs, demo: bool) -> Result<i32> {
    replay_tui_with(r, demo, None).await
}

async fn replay_tui_with(r: ReplayArgs, demo: bool, notice: Option<String>) -> Result<i32> {
    if !r.follow {
        validate(&r.file)?;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let handle = replay::spawn(
        replay::Options {
            path: r.file.clone(),
            speed: r.speed,
            follow: r.follow,
        },
        tx.clone(),
    )?;
    let mut app = App::new(SourceKind::Replay {
        file: r.file.display().to_string(),
        demo,
    });
    app.notice = notice;
    run_tui(app, tx, rx, theme(&r.display), None, Some(handle)).await
}

async fn run_tui(
    mut app: App,
    tx: Sender<Event>,
    mut rx: Receiver<Event>,
    theme: Theme,
    recorder: Option<Recorder>,
    replay: Option<replay::ReplayHandle>,
) -> Result<i32> {
    let guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    spawn_input(tx.clone());
    spawn_signals(tx.clone())?;
    drop(tx);
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    // No terminal.clear(): it asks the terminal for the cursor position, which pseudo-terminals
    // of some harnesses and multiplexers never answer; the alternate screen starts blank anyway.
    let result = event_loop(
        &mut terminal,
        &mut app,
        &mut rx,
        &theme,
        recorder.as_ref(),
        replay.as_ref(),
    )
    .await;
    drop(guard);
    if let Some(reason) = &app.quit_reason {
        eprintln!("gpumon: {reason}");
    }
    result.map(|()| 0)
}

/// The one loop: apply every queued event, then draw at most once per `MIN_FRAME`, only when dirty.
pub async fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &mut Receiver<Event>,
    theme: &Theme,
    recorder: Option<&Recorder>,
    replay: Option<&replay::ReplayHandle>,
) -> Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let mut dirty = true;
    let mut last_draw = Instant::now() - MIN_FRAME;
    loop {
        if dirty && last_draw.elapsed() >= MIN_FRAME {
            terminal.draw(|f| crate::ui::draw(f, app, theme))?;
            last_draw = Instant::now();
            dirty = false;
        }
        let wait = if dirty {
            MIN_FRAME.saturating_sub(last_draw.elapsed())
        } else {
            Duration::from_secs(3600)
        };
        let first = tokio::select! {
            ev = rx.recv() => ev,
            () = tokio::time::sleep(wait) => continue,
        };
        let Some(first) = first else { return Ok(()) };
        let mut next = Some(first);
        while let Some(ev) = next {
            if let (Event::Frame(f), Some(r)) = (&ev, recorder) {
                r.write(f);
            }
            dirty = true;
            match app.update(ev) {
                Some(Effect::Quit) => return Ok(()),
                Some(Effect::Replay(c)) => {
                    if let Some(h) = replay {
                        let _ = h.control.send(c);
                    }
                }
                Some(Effect::Bell) => {}
                None => {}
            }
            next = rx.try_recv().ok();
        }
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
            if let Some(sig) = signals.forever().next() {
                let name = match sig {
                    SIGHUP => "SIGHUP (terminal hung up)",
                    SIGTERM => "SIGTERM",
                    _ => "SIGINT",
                };
                let _ = tx.blocking_send(Event::Quit(format!("stopped by {name}")));
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

async fn record(r: RecordArgs) -> Result<i32> {
    let (ftx, mut frx) = mpsc::channel::<Frame>(QUEUE);
    let header = nvml::spawn(r.interval, ftx).map_err(|e| anyhow::anyhow!("cannot record: {e}"))?;
    let recorder = Recorder::create(&r.output, &header)?;
    let (stx, mut srx) = mpsc::channel(4);
    spawn_signals(stx)?;
    let deadline = r
        .duration
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    eprintln!(
        "gpumon: recording {} GPU(s) every {} ms to {}{}",
        header.gpus.len(),
        r.interval.as_millis(),
        r.output.display(),
        r.duration
            .map(|s| format!(" for {s} s"))
            .unwrap_or_else(|| " until interrupted".into())
    );
    loop {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            f = frx.recv() => match f {
                Some(f) => recorder.write(&f),
                None => break,
            },
            _ = srx.recv() => break,
            () = sleep => break,
        }
    }
    drop(recorder);
    Ok(0)
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
