//! Everything the one event loop reacts to.

use crossterm::event::{KeyEvent, MouseEvent};

use crate::model::frame::Frame;
use crate::source::replay::{ReplayEvent, ReplayStatus};

// Events are moved one at a time through a bounded channel, never stored in bulk, so the
// size of the frame variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    /// Data from any source (NVML, companion channel, replay).
    Frame(Frame),
    /// Replay jumped backwards: the model is rebuilt from the frames that follow.
    Reset,
    /// Where a replay stands, for the status line.
    Replay(ReplayStatus),
    Key(KeyEvent),
    /// A click or a wheel turn (mouse capture is on while the TUI runs).
    Mouse(MouseEvent),
    Resize,
    /// SIGTSTP from outside (`kill -TSTP`): suspend as Ctrl-Z does, from the loop.
    Suspend,
    /// A signal or a dead terminal: restore and exit.
    Quit(String),
}

impl From<ReplayEvent> for Event {
    fn from(e: ReplayEvent) -> Event {
        match e {
            ReplayEvent::Frame(f) => Event::Frame(f),
            ReplayEvent::Reset => Event::Reset,
            ReplayEvent::Status(s) => Event::Replay(s),
        }
    }
}
