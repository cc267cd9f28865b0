//! The bytes on their way to the terminal, all in this room. A frame is drawn into the
//! buffer of a `Screen` (`screen`), which sends only the cells that changed since the last
//! frame; `sized` remembers the terminal's size between frames and hides the cursor once;
//! `ansi` turns the cells into escape codes; a `BufWriter` makes that one write a frame;
//! `inert` drops the characters that would steer the terminal (bidi overrides, zero-width)
//! on the way to stdout. The runner only asks for a `Terminal` and draws on it.
//!
//! `screen` and `ansi` stand in for ratatui's `Terminal` and crossterm's `draw` because
//! those were a quarter and a fifth of a live redraw's instructions. Each is held to the
//! library it replaces by its tests (the cells ratatui's diff would send; crossterm's bytes
//! for random frames), so a ratatui or crossterm upgrade is checked here and nowhere else.
//! Setting the terminal up and giving it back (raw mode, the alternate screen, Ctrl-Z) is
//! `tui::term`.

pub mod ansi;
pub(crate) mod inert;
pub mod screen;
pub(crate) mod sized;

use std::io::{self, BufWriter, Stdout, Write};

use ratatui::backend::Backend;

use self::ansi::Direct;
use self::inert::InertWriter;
use self::screen::Screen;
use self::sized::SizedBackend;

/// Bytes of escape codes and text gathered before a write: a full 120x40 repaint fits.
const OUT_BUFFER: usize = 32 * 1024;

/// The terminal gpumon draws on: stdout, through every step above.
pub(crate) type Terminal = Screen<SizedBackend<Direct<BufWriter<InertWriter<Stdout>>>>>;

/// The terminal on stdout. One write a frame: crossterm queues each cell run as its own small
/// write, which would go through the filter one by one and reach the terminal in 1 KiB pieces
/// (stdout's line buffer). The terminal is flushed at the end of every draw, so nothing waits
/// in the buffer between frames. Unlike ratatui's `Terminal`, nothing here asks the terminal
/// for the cursor position, which pseudo-terminals of some harnesses never answer.
pub(crate) fn stdout() -> Terminal {
    let out = BufWriter::with_capacity(OUT_BUFFER, InertWriter::new(io::stdout()));
    Screen::new(SizedBackend::new(Direct::new(out)))
}

impl<B: Backend> Screen<SizedBackend<B>> {
    /// Someone else had the screen (a shell after Ctrl-Z) or resized it: the next draw asks
    /// the size again, hides the cursor again and sends every cell.
    pub(crate) fn taken_back(&mut self) -> Result<(), B::Error> {
        self.backend().forget_size();
        self.repaint_all()
    }
}

/// The terminal's bell, between frames (nothing of a frame is waiting in the buffer then).
pub(crate) fn bell() {
    let _ = io::stdout().write_all(b"\x07");
}
