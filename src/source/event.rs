//! Everything the one event loop reacts to, in every mode: data, replay news, signals, and
//! (`I`) a terminal's input. The TUI's `I` holds its keys and clicks (`tui::event`); headless
//! modes take `NoInput`, so nothing in them knows a terminal library.

use crate::model::frame::Frame;
use crate::source::replay::{ReplayEvent, ReplayStatus};

// Events are moved one at a time through a bounded channel, never stored in bulk, so the
// size of the frame variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event<I> {
    /// Data from any source (NVML, companion channel, replay).
    Frame(Frame),
    /// Replay jumped backwards: the model is rebuilt from the frames that follow.
    Reset,
    /// A round of Prometheus queries: the fleet, and the open node's frames.
    Fleet(Box<crate::source::prometheus::news::FleetNews>),
    /// Where a replay stands, for the status line.
    Replay(ReplayStatus),
    /// A key or a click, in a mode that has a terminal.
    Input(I),
    /// The terminal changed size, or was given back after a suspend: repaint every cell.
    Resize,
    /// SIGTSTP from outside (`kill -TSTP`): suspend as Ctrl-Z does, from the loop.
    Suspend,
    /// A signal or a dead terminal: restore and exit.
    Quit(String),
}

/// The input of a mode without a terminal: there is none.
#[derive(Debug)]
pub enum NoInput {}

impl<I> From<Frame> for Event<I> {
    fn from(f: Frame) -> Self {
        Event::Frame(f)
    }
}

impl<I> From<ReplayEvent> for Event<I> {
    fn from(e: ReplayEvent) -> Self {
        match e {
            ReplayEvent::Frame(f) => Event::Frame(f),
            ReplayEvent::Reset => Event::Reset,
            ReplayEvent::Status(s) => Event::Replay(s),
        }
    }
}
