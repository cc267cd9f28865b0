//! Everything the one event loop reacts to.

use crossterm::event::{KeyEvent, MouseEvent};

use crate::frame::Frame;
use crate::model::time::Ts;

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
    /// A signal or a dead terminal: restore and exit.
    Quit(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayStatus {
    pub pos: Ts,
    pub start: Ts,
    /// Time of the recording's last frame, once the file has been scanned (`None` while
    /// scanning, or when following a growing file).
    pub end: Option<Ts>,
    pub speed: Speed,
    pub paused: bool,
    /// The whole file has been read (and we are not following it).
    pub ended: bool,
    pub following: bool,
    /// At the end, start again from the beginning.
    pub looping: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    Times(f64),
    Max,
}

impl Speed {
    pub fn parse(s: &str) -> Result<Speed, String> {
        if s.eq_ignore_ascii_case("max") {
            return Ok(Speed::Max);
        }
        let v: f64 = s.trim_end_matches(['x', 'X']).parse().map_err(|_| {
            format!("invalid speed '{s}': use a factor such as 1, 10, 0.5 or 'max'")
        })?;
        if !(v.is_finite() && v > 0.0 && v <= 100_000.0) {
            return Err(format!(
                "invalid speed '{s}': must be between 0 and 100000, or 'max'"
            ));
        }
        Ok(Speed::Times(v))
    }

    pub fn label(&self) -> String {
        match self {
            Speed::Max => "max".into(),
            Speed::Times(v) if v.fract() == 0.0 => format!("{v:.0}x"),
            Speed::Times(v) => format!("{v}x"),
        }
    }

    pub fn faster(self) -> Speed {
        match self {
            Speed::Times(v) if v < 1024.0 => Speed::Times(v * 2.0),
            _ => Speed::Max,
        }
    }

    pub fn slower(self) -> Speed {
        match self {
            Speed::Max => Speed::Times(1024.0),
            Speed::Times(v) => Speed::Times((v / 2.0).max(0.125)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_parse_and_step() {
        assert_eq!(Speed::parse("max"), Ok(Speed::Max));
        assert_eq!(Speed::parse("10x"), Ok(Speed::Times(10.0)));
        assert!(Speed::parse("0").is_err());
        assert!(Speed::parse("fast").is_err());
        assert_eq!(Speed::Times(1.0).faster(), Speed::Times(2.0));
        assert_eq!(Speed::Max.slower(), Speed::Times(1024.0));
        assert_eq!(Speed::Times(0.5).label(), "0.5x");
    }
}
