//! TEA core: `App` holds the model and the UI state; `update` applies one event
//! and returns what the loop must do. No I/O here, no drawing.

use crate::event::{Event, ReplayStatus, Speed};
use crate::frame::Frame;
use crate::keys::{Action, action_for};
use crate::model::state::State;
use crate::model::time::Ts;
use crate::pipeline::{Pipeline, Sinks};
use crate::source::replay::Control;

/// Time windows the memory charts can show, shortest first.
pub const ZOOMS: [(i64, &str); 8] = [
    (60_000, "1m"),
    (300_000, "5m"),
    (900_000, "15m"),
    (3_600_000, "1h"),
    (6 * 3_600_000, "6h"),
    (24 * 3_600_000, "24h"),
    (72 * 3_600_000, "72h"),
    (7 * 24 * 3_600_000, "7d"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Overview,
    Detail,
    Alerts,
}

/// Where the data comes from, for the status line and labels.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    Live { interval_ms: u64 },
    Replay { file: String, demo: bool },
}

/// What the loop does after `update`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Effect {
    Quit,
    Replay(Control),
    Bell,
}

pub struct App {
    /// The model, the alert engine and the outputs: what every mode shares.
    pub pipe: Pipeline,
    /// Set while the view is frozen: rendering reads this copy, sampling goes on.
    pub frozen: Option<Box<State>>,
    pub source: SourceKind,
    pub replay: Option<ReplayStatus>,
    pub view: View,
    pub help: bool,
    pub gpu: usize,
    pub proc_row: usize,
    pub zoom: usize,
    pub alert_row: usize,
    /// Charts run from zero to the card's total instead of fitting the data (key `f`).
    pub full_scale: bool,
    /// The detail chart shows the whole card instead of the selected process (key `c`).
    pub card_chart: bool,
    /// Ring the terminal bell when an alert is raised or worsens.
    pub bell: bool,
    /// A note shown once in the status line (e.g. why the demo is playing).
    pub notice: Option<String>,
    pub quit_reason: Option<String>,
}

impl App {
    pub fn new(source: SourceKind, sinks: Sinks) -> App {
        App {
            pipe: Pipeline::new(sinks),
            frozen: None,
            source,
            replay: None,
            view: View::Overview,
            help: false,
            gpu: 0,
            proc_row: 0,
            zoom: 1,
            alert_row: 0,
            full_scale: false,
            card_chart: false,
            bell: false,
            notice: None,
            quit_reason: None,
        }
    }

    /// The state views render: the frozen copy while frozen.
    pub fn view_state(&self) -> &State {
        self.frozen.as_deref().unwrap_or(&self.pipe.state)
    }

    pub fn window_ms(&self) -> i64 {
        ZOOMS[self.zoom.min(ZOOMS.len() - 1)].0
    }

    pub fn window_label(&self) -> &'static str {
        ZOOMS[self.zoom.min(ZOOMS.len() - 1)].1
    }

    pub fn is_replay(&self) -> bool {
        matches!(self.source, SourceKind::Replay { .. })
    }

    /// The data-time clock of the visible state.
    pub fn now(&self) -> Ts {
        self.view_state().now
    }

    pub fn update(&mut self, ev: Event) -> Option<Effect> {
        match ev {
            Event::Frame(f) => self.apply(&f),
            Event::Reset => {
                self.pipe.reset();
                None
            }
            Event::Replay(s) => {
                self.replay = Some(s);
                None
            }
            Event::Resize => None,
            Event::Quit(reason) => {
                self.quit_reason = Some(reason);
                Some(Effect::Quit)
            }
            Event::Key(k) => action_for(k).and_then(|a| self.act(a)),
        }
    }

    pub fn apply(&mut self, f: &Frame) -> Option<Effect> {
        self.pipe.apply(f);
        let n = self.pipe.state.gpus.len();
        if n > 0 && self.gpu >= n {
            self.gpu = n - 1;
        }
        let ring = std::mem::take(&mut self.pipe.ring);
        if self.pipe.tripped.is_some() {
            return Some(Effect::Quit);
        }
        (ring && self.bell).then_some(Effect::Bell)
    }

    fn act(&mut self, a: Action) -> Option<Effect> {
        if self.help && !matches!(a, Action::Quit | Action::Help | Action::Back) {
            return None;
        }
        let gpus = self.view_state().gpus.len().max(1);
        match a {
            Action::Quit => return Some(Effect::Quit),
            Action::Help => self.help = !self.help,
            Action::Back => {
                if self.help {
                    self.help = false;
                } else {
                    self.view = View::Overview;
                }
            }
            Action::NextGpu => {
                self.gpu = (self.gpu + 1) % gpus;
                self.proc_row = 0;
            }
            Action::PrevGpu => {
                self.gpu = (self.gpu + gpus - 1) % gpus;
                self.proc_row = 0;
            }
            Action::Up if self.view == View::Alerts => {
                self.alert_row = self.alert_row.saturating_sub(1)
            }
            Action::Down if self.view == View::Alerts => {
                let n = self.pipe.alerts.active().len() + self.pipe.alerts.history().count();
                self.alert_row = (self.alert_row + 1).min(n.saturating_sub(1));
            }
            // The row may point past a process that exited: step from where the view clamps it.
            Action::Up => self.proc_row = self.proc_row.min(self.visible_procs()).saturating_sub(1),
            Action::Down => {
                let n = self.visible_procs();
                if n > 0 {
                    self.proc_row = (self.proc_row + 1).min(n - 1);
                }
            }
            Action::Enter => self.view = View::Detail,
            Action::Alerts => {
                self.view = if self.view == View::Alerts {
                    View::Overview
                } else {
                    View::Alerts
                }
            }
            Action::Ack => {
                self.pipe.alerts.ack_all();
            }
            Action::Freeze => {
                if self.is_replay() {
                    return Some(Effect::Replay(Control::TogglePause));
                }
                self.frozen = match self.frozen.take() {
                    Some(_) => None,
                    None => Some(Box::new(self.pipe.state.clone())),
                };
            }
            Action::FullScale => self.full_scale = !self.full_scale,
            Action::CardChart => self.card_chart = !self.card_chart,
            Action::ZoomIn => self.zoom = self.zoom.saturating_sub(1),
            Action::ZoomOut => self.zoom = (self.zoom + 1).min(ZOOMS.len() - 1),
            Action::Faster | Action::Slower => {
                let cur = self.replay.map_or(Speed::Times(1.0), |r| r.speed);
                let next = if a == Action::Faster {
                    cur.faster()
                } else {
                    cur.slower()
                };
                return self
                    .is_replay()
                    .then_some(Effect::Replay(Control::SetSpeed(next)));
            }
            Action::SeekBack => {
                let w = self.window_ms();
                return self
                    .is_replay()
                    .then_some(Effect::Replay(Control::Seek(-w)));
            }
            Action::SeekForward => {
                let w = self.window_ms();
                return self.is_replay().then_some(Effect::Replay(Control::Seek(w)));
            }
            Action::ToEnd => return self.is_replay().then_some(Effect::Replay(Control::ToEnd)),
        }
        None
    }

    fn visible_procs(&self) -> usize {
        let s = self.view_state();
        s.gpus
            .get(self.gpu)
            .map_or(0, |g| s.procs_on(g.info.index).len())
    }
}
