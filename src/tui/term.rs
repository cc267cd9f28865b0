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

/// Ctrl-Z, as htop does it: give the terminal back, stop with SIGTSTP's own default action
/// (so the shell says `Stopped` and `fg` resumes), and on SIGCONT take raw mode, the
/// alternate screen and the mouse again; the caller repaints every cell. Runs on the loop's
/// thread, so no frame is drawn onto the shell's screen in between.
pub(crate) fn suspend() {
    restore();
    // SAFETY: sigaction with a zeroed struct (SIG_DFL) and the saved one put back; raise
    // targets this process. While SIGTSTP has its default action the process stops here.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTSTP, &dfl, &mut old) == 0 {
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
