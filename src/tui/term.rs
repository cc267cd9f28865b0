//! Terminal setup and restore. Restore runs from the guard's Drop, from the
//! panic hook (before the panic message, so it is readable), and on signals.

use std::io::{self, Write};
use std::sync::Once;

use crossterm::{cursor, event, execute, terminal};

static HOOK: Once = Once::new();

/// Put the terminal back: leave the alternate screen, show the cursor, cooked mode.
/// Safe to call more than once and on a terminal that has gone away (SSH drop).
pub(crate) fn restore() {
    let mut out = io::stdout();
    let _ = execute!(
        out,
        event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
    let _ = out.flush();
}

/// Whether a Ctrl-Z stop can be undone: some ancestor outside gpumon's process group (a
/// job-control shell) is in the same session and can `fg` the job. Otherwise (tmux or ssh
/// running gpumon directly, `sh -c`) the group is orphaned: the kernel discards SIGTSTP
/// there, and a stop would leave a pane nobody can resume.
pub(crate) fn job_control() -> bool {
    // SAFETY: queries of process ids, no memory passed.
    let (group, session) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
    let mut pid = unsafe { libc::getppid() };
    // Wrappers (a launcher script, `env`) share the group: look past them.
    for _ in 0..16 {
        if pid <= 1 {
            return false;
        }
        // SAFETY: as above.
        let (pg, sid) = unsafe { (libc::getpgid(pid), libc::getsid(pid)) };
        if pg != group {
            return sid == session;
        }
        match parent_of(pid) {
            Some(p) => pid = p,
            None => return false,
        }
    }
    false
}

/// The parent of `pid`, from /proc (the field after the parenthesised command name).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Ctrl-Z, as htop does it: give the terminal back, stop, and on SIGCONT take raw mode, the
/// alternate screen and the mouse again; the caller repaints every cell. Runs on the loop's
/// thread, so no frame is drawn onto the shell's screen in between.
///
/// A key stops gpumon with SIGTSTP's own default action (the shell says `Stopped`), or,
/// when gpumon shares its group with a wrapper, the whole job with SIGSTOP, as the
/// terminal's own Ctrl-Z would stop every process of the job. A SIGTSTP someone sent with
/// `kill` stops with SIGSTOP, which no group discards: they will send SIGCONT.
pub(crate) fn suspend(sent: bool) {
    restore();
    // SAFETY: sigaction with a zeroed struct (SIG_DFL) and the saved one put back; raise is
    // synchronous for this thread, so the stop happens before the handler is back. kill(0)
    // signals this process's own group.
    unsafe {
        let leader = libc::getpgrp() == libc::getpid();
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        let mut old: libc::sigaction = std::mem::zeroed();
        if sent {
            libc::raise(libc::SIGSTOP);
        } else if !leader {
            libc::kill(0, libc::SIGSTOP);
        } else if libc::sigaction(libc::SIGTSTP, &dfl, &mut old) == 0 {
            libc::raise(libc::SIGTSTP);
            libc::sigaction(libc::SIGTSTP, &old, std::ptr::null_mut());
        } else {
            libc::raise(libc::SIGSTOP);
        }
    }
    let _ = terminal::enable_raw_mode();
    let _ = execute!(
        io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide,
        event::EnableMouseCapture
    );
}

pub(crate) struct TerminalGuard;

impl TerminalGuard {
    pub(crate) fn enter() -> io::Result<TerminalGuard> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
                // A panic on any thread (sampler, replay) leaves the UI without data and the
                // terminal already restored: drawing on would garble the shell, so stop here.
                std::process::exit(101);
            }));
        });
        terminal::enable_raw_mode()?;
        let guard = TerminalGuard;
        // Mouse capture (click to select, wheel to scroll) is undone by `restore` on every
        // exit path, like the alternate screen.
        execute!(
            io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide,
            event::EnableMouseCapture
        )?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}
