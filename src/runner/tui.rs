//! The terminal UI modes: live watch, replay, and the one event loop.

use crate::cli::{ReplayArgs, WatchArgs};
use crate::model::frame::Frame;
use crate::record::validate;
use crate::source::replay;
use crate::source::replay::Speed;
use crate::tui::app::{App, Effect, SourceKind};
use crate::tui::event::Event;
use crate::tui::output::{self, Terminal};
use crate::tui::term::TerminalGuard;
use crate::tui::ui::theme::Theme;
use anyhow::{Context, Result};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, Receiver, Sender};

use super::*;

pub(super) async fn watch(w: WatchArgs, settings: &Settings) -> Result<i32> {
    if w.fleet.prometheus.is_some() {
        return fleet_tui(w, settings).await;
    }
    for p in [&w.record, &w.out.csv, &w.out.jsonl].into_iter().flatten() {
        check_writable(p, "output")?;
    }
    if w.out.headless {
        return watch_headless(w, settings).await;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let (header, channel) = start_live(w.interval, w.socket_dir.clone(), &tx);
    let mut notice = None;
    let header = match header {
        Ok(h) => h,
        Err(e) if companions_waiting(w.socket_dir.as_deref()) => {
            // No driver here, but instrumented processes are: show them rather than the demo.
            crate::say!("gpumon: {e}; showing the companions that are running");
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
            crate::say!("gpumon: {e} -- showing the bundled recording of a real H200 run instead");
            // One short line on screen; the full reason went to stderr above.
            let notice = "no NVIDIA driver: replaying a recorded 2-GPU H200 run (gpumon demo list)"
                .to_string();
            let args = ReplayArgs {
                file,
                speed: Some(Speed::Times(1.0)),
                follow: false,
                strict: false,
                filter: w.filter,
                out: w.out,
                display: w.display,
            };
            return replay_tui(args, true, Some(notice), settings).await;
        }
    };
    check_live_filter(&w.filter, &header.gpus)?;
    let recorder = match &w.record {
        Some(p) => Some(start_recorder(Some(p), &header, w.record_format)?.0),
        None => None,
    };
    let pipe = pipeline(&w.out, recorder, &w.filter, settings).await?;
    let mut app = App::new(
        SourceKind::Live {
            interval_ms: w.interval.as_millis() as u64,
        },
        pipe,
    );
    app.bell = w.out.bell;
    app.notice = notice;
    app.recording = w.record.as_ref().map(|p| p.display().to_string());
    app.apply(&Frame::Header(header));
    app.apply_settings(settings);
    let code = run_tui(app, tx, rx, theme(&w.display, settings), None).await;
    drop(channel);
    code
}

/// The demo opens this far into its recording, so the charts already have history.
const DEMO_SKIP_MS: i64 = 40_000;

/// A demo that reached its end starts again (from where it opened, history rebuilt):
/// the seek control to send, once per end reached.
fn demo_loop(app: &App, looped_from: &mut Option<i64>) -> Option<replay::Control> {
    let SourceKind::Replay { demo: true, .. } = app.source else {
        return None;
    };
    let r = app.replay?;
    if !r.ended || r.paused || r.following {
        *looped_from = None;
        return None;
    }
    if *looped_from == Some(r.pos) {
        return None;
    }
    *looped_from = Some(r.pos);
    Some(replay::Control::Seek(r.start + DEMO_SKIP_MS - r.pos))
}

pub(super) async fn replay_tui(
    r: ReplayArgs,
    demo: bool,
    notice: Option<String>,
    settings: &Settings,
) -> Result<i32> {
    if !r.follow {
        validate(&r.file, r.strict)?;
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    let handle = replay::spawn(
        replay::Options {
            path: r.file.clone(),
            speed: r.speed.unwrap_or(Speed::Times(1.0)),
            follow: r.follow,
            skip_ms: if demo { DEMO_SKIP_MS } else { 0 },
            looping: false,
            controls: true,
            strict: r.strict,
        },
        tx.clone(),
    )?;
    let mut app = App::new(
        SourceKind::Replay {
            file: r.file.display().to_string(),
            demo,
        },
        pipeline(&r.out, None, &r.filter, settings).await?,
    );
    app.bell = r.out.bell;
    app.notice = notice;
    app.apply_settings(settings);
    run_tui(app, tx, rx, theme(&r.display, settings), Some(handle)).await
}

pub(super) async fn run_tui(
    app: App,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    theme: Theme,
    replay: Option<replay::ReplayHandle>,
) -> Result<i32> {
    run_tui_with(app, tx, rx, theme, replay, None).await
}

/// `run_tui`, with the cluster view's line to its source (which node is open).
pub(super) async fn run_tui_with(
    mut app: App,
    tx: Sender<Event>,
    mut rx: Receiver<Event>,
    theme: Theme,
    replay: Option<replay::ReplayHandle>,
    open: Option<crate::source::prometheus::OpenNode>,
) -> Result<i32> {
    if !has_terminal() {
        anyhow::bail!(
            "no terminal to draw on; over SSH use `ssh -t HOST gpumon`, or run `gpumon watch \
             --headless` with --serve, --csv, --jsonl or --alerts-jsonl"
        );
    }
    let guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    spawn_input(tx.clone());
    spawn_signals(tx.clone())?;
    drop(tx);
    let mut screen = output::stdout();
    let result = event_loop(
        &mut screen,
        &mut app,
        &mut rx,
        &theme,
        replay.as_ref(),
        open.as_ref(),
    )
    .await;
    drop(guard);
    if let Some(reason) = &app.quit_reason {
        crate::say!("gpumon: {reason}");
    }
    result.map(|()| alert_exit(&app.pipe).unwrap_or(0))
}

/// Drawing needs stdout on a terminal and a controlling terminal for keys (crossterm opens
/// /dev/tty); without them crossterm fails with a bare "No such device or address".
fn has_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    let stdout_tty = unsafe { libc::isatty(1) == 1 };
    stdout_tty && std::fs::File::open("/dev/tty").is_ok()
}

/// The one loop: apply every queued event, then draw only when something changed. Keys are
/// answered within one `INPUT_FRAME`; data alone redraws at most every `LIVE_DATA_FRAME`
/// (`REPLAY_DATA_FRAME` in a replay), so fast sampling or a fast replay does not turn into
/// a redraw storm.
///
/// A change that arrives when its frame is all but due (within a quarter of it, `EARLY`) is
/// drawn at once rather than on a timer: live ticks arrive once a second, a few ms before
/// the last draw is a whole second old, and waiting for that moment woke the loop twice a
/// second instead of once (each wake-up is a thread hand-over the bare poller does not pay).
pub(super) async fn event_loop(
    screen: &mut Terminal,
    app: &mut App,
    rx: &mut Receiver<Event>,
    theme: &Theme,
    replay: Option<&replay::ReplayHandle>,
    open: Option<&crate::source::prometheus::OpenNode>,
) -> Result<()> {
    let data_frame = if replay.is_some() {
        REPLAY_DATA_FRAME
    } else {
        LIVE_DATA_FRAME
    };
    let mut dirty: Option<Duration> = Some(Duration::ZERO);
    let mut last_draw = Instant::now();
    let mut looped_from = None;
    loop {
        if let Some(cap) = dirty
            && last_draw.elapsed() >= cap - cap / EARLY
        {
            screen.draw(|buf| crate::tui::ui::draw_buffer(buf, app, theme))?;
            last_draw = Instant::now();
            dirty = None;
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
                Event::Input(_) | Event::Resize => INPUT_FRAME,
                _ => data_frame,
            };
            dirty = Some(dirty.map_or(cap, |d| d.min(cap)));
            if matches!(ev, Event::Resize) {
                // Also sent after a resume from SIGTSTP when the loop could not take it
                // (threads::suspend): the screen was given back, so repaint every cell.
                screen.taken_back()?;
            }
            match app.update(ev) {
                Some(Effect::Quit) => return Ok(()),
                Some(Effect::Replay(c)) => {
                    if let Some(h) = replay {
                        let _ = h.control.send(c);
                    }
                }
                Some(Effect::Signal { pid, sig, started }) => {
                    app.signal_done(pid, sig, crate::tui::signal::send(pid, sig, started));
                }
                Some(Effect::Suspend { sent: false }) if !crate::tui::term::job_control() => {
                    // 36 characters: whole in a 40-column pane.
                    app.flash = Some("not suspended: no shell to fg gpumon".into());
                }
                Some(Effect::Suspend { sent }) => {
                    crate::tui::term::suspend(sent);
                    // The shell had the screen (and may have resized it): the next draw
                    // asks for the size and repaints every cell.
                    screen.taken_back()?;
                    dirty = Some(Duration::ZERO);
                }
                Some(Effect::Bell) => output::bell(),
                Some(Effect::Open(node)) => {
                    if let Some(o) = open {
                        let _ = o.send(node);
                    }
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
        if let (Some(c), Some(h)) = (demo_loop(app, &mut looped_from), replay) {
            let _ = h.control.send(c);
        }
    }
}
