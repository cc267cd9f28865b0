//! The TUI's events: the loop's (`source::event`) with the terminal's keys and clicks.

use crossterm::event::{KeyEvent, MouseEvent};

/// What a person does at the terminal.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    /// A click or a wheel turn (mouse capture is on while the TUI runs).
    Mouse(MouseEvent),
}

pub type Event = crate::source::event::Event<Input>;

impl From<KeyEvent> for Event {
    fn from(k: KeyEvent) -> Event {
        Event::Input(Input::Key(k))
    }
}

impl From<MouseEvent> for Event {
    fn from(m: MouseEvent) -> Event {
        Event::Input(Input::Mouse(m))
    }
}
