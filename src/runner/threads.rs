//! Threads that turn terminal input and signals into loop events.

use crate::source::event::Event;
use anyhow::{Context, Result};
use std::time::Duration;
use tokio::sync::mpsc::Sender;

/// Longest the input thread waits for a key before it looks whether its loop still runs.
const INPUT_LINGER: Duration = Duration::from_secs(30);

pub(super) fn spawn_input(tx: Sender<crate::tui::event::Event>) {
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            use crossterm::event::{self, Event as CEvent, KeyEventKind};
            loop {
                if tx.is_closed() {
                    return;
                }
                // A key ends the wait at once; the timeout only bounds how long a thread
                // whose loop has ended lingers (the process exits right after its loop), so
                // it can be long: each timeout is a wake-up the bare poller does not pay.
                match event::poll(INPUT_LINGER) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => {
                        let _ =
                            tx.blocking_send(Event::Quit(format!("terminal input failed: {e}")));
                        return;
                    }
                }
                let ev = match event::read() {
                    Ok(CEvent::Key(k)) if k.kind != KeyEventKind::Release => Event::from(k),
                    Ok(CEvent::Resize(..)) => Event::Resize,
                    Ok(CEvent::Mouse(m)) => Event::from(m),
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

pub(super) fn spawn_signals<I: Send + 'static>(tx: Sender<Event<I>>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP};
    // SIGQUIT and SIGTSTP cannot come from the keyboard in raw mode, but `kill`
    // sends them: without handling, they left the alternate screen on.
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGTSTP])
            .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut asked = false;
            for sig in signals.forever() {
                if sig == SIGTSTP {
                    suspend(&tx);
                    continue;
                }
                if asked {
                    // The loop did not stop after the first signal (stuck writing to a dead
                    // terminal?): restore what can be restored and leave now.
                    crate::tui::term::restore();
                    std::process::exit(128 + sig);
                }
                asked = true;
                let name = match sig {
                    SIGHUP => "SIGHUP (terminal hung up)",
                    SIGTERM => "SIGTERM",
                    SIGQUIT => "SIGQUIT",
                    _ => "SIGINT",
                };
                if tx
                    .try_send(Event::Quit(format!("stopped by {name}")))
                    .is_err()
                {
                    // The loop is gone or drowning in events: do not wait for it.
                    crate::tui::term::restore();
                    std::process::exit(128 + sig);
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// SIGTSTP from outside. The TUI's loop suspends (`term::suspend`) as for Ctrl-Z, between
/// two frames (from here only when the loop cannot take the event); headless just stops.
fn suspend<I>(tx: &Sender<Event<I>>) {
    if !crossterm::terminal::is_raw_mode_enabled().unwrap_or(false) {
        // SAFETY: raising a signal at ourselves; SIGSTOP cannot be caught.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    } else if tx.try_send(Event::Suspend).is_err() {
        crate::tui::term::suspend(true);
        let _ = tx.try_send(Event::Resize);
    }
}
