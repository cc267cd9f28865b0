//! TEA core: `App` holds the model and the UI state; `update` applies one event
//! and returns what the loop must do. No I/O here, no drawing (the one exception,
//! `kill(pid, 0)` before a kill prompt, goes through the replaceable `may_signal`).
//!
//! The selection is an identity (a PID on a GPU, an alert id), not a row: after every
//! event `sync` finds it again in the freshly sorted lists, and only when it is gone does
//! it move to the neighbour, saying so in the status line.

mod commands;
mod fleet;
mod input;
mod zoom;

pub use fleet::FleetView;
pub use zoom::Solo;
mod settings;

use std::cell::RefCell;

use ratatui::layout::Rect;

use crate::model::alerts::Alert;
use crate::model::alerts::engine::AlertEngine;
use crate::model::frame::Frame;
use crate::model::state::{ProcGpu, ProcState, State};
use crate::pipeline::Pipeline;
use crate::source::replay::Control;
use crate::source::replay::{ReplayStatus, Speed};
use crate::tui::event::{Event, Input};
use crate::tui::keys::{Action, action_for};
use crate::tui::selection::{AlertId, Sort, locate};

pub use crate::settings::ZOOMS;

/// `ZOOMS` position of the fitted `all` mode.
pub const ZOOM_ALL: usize = 0;
/// The span a live session opens with, and the one `w` returns to by default.
const ZOOM_LIVE: usize = 4;

/// What a chart's time axis spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The whole history of what is charted (the recording, the process), fitted.
    All,
    /// The last this many ms, on a fixed grid.
    Span(i64),
}

/// The screen the body shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The nodes a Prometheus server scrapes (`--prometheus`), above their GPUs.
    Nodes,
    Overview,
    Detail,
    Alerts,
}

/// Where the data comes from, for the status line and labels.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    Live {
        interval_ms: u64,
    },
    Replay {
        file: String,
        demo: bool,
    },
    /// A fleet read from Prometheus (the URL, without credentials).
    Prometheus {
        url: String,
    },
}

/// What the loop does after `update`.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Quit,
    Replay(Control),
    Bell,
    /// Ctrl-Z (`sent: false`) or SIGTSTP sent from outside (`sent: true`): give the
    /// terminal back and stop until `fg` or SIGCONT.
    Suspend {
        sent: bool,
    },
    /// Open a node of the fleet (None: back to the node list): the Prometheus source then
    /// reads its series.
    Open(Option<String>),
    /// Send a signal (confirmed by the user); the loop reports back with `signal_done`.
    Signal {
        pid: u32,
        sig: i32,
        /// Start time (clock ticks) of the process the prompt named.
        started: u64,
    },
}

/// A question on the bottom line that takes the next keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Typing the process filter.
    Filter,
    /// Acknowledge all this many active alerts?
    AckAll(usize),
    /// Send `sig` to `pid` (`what` names it: PID and command as /proc says)?
    Signal {
        pid: u32,
        sig: i32,
        what: String,
        started: u64,
    },
}

/// Something a click can select; the renderers register where they drew each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// A GPU card (position in `State::gpus`).
    Gpu(usize),
    /// A process row (GPU position, PID).
    Proc {
        gpu: usize,
        pid: u32,
    },
    Alert(AlertId),
    /// A process-list column header: sort by it (again: invert).
    SortBy(crate::tui::selection::SortKey),
    /// The alert bar: open the panel on the alert it shows.
    AlertBar,
}

/// What a freeze (`p`) keeps: the model and its alerts at one moment, so every reader of a
/// frozen screen sees the same moment (the alert engine runs on, unseen, until thawed).
pub struct Frozen {
    pub state: State,
    pub alerts: AlertEngine,
}

pub struct App {
    /// The model, the alert engine and the outputs: what every mode shares.
    pub pipe: Pipeline,
    /// The cluster view, when the data comes from Prometheus: the node list and which node
    /// `pipe` holds.
    pub fleet: Option<Box<FleetView>>,
    /// Set while the view is frozen: rendering reads this copy, sampling goes on.
    pub frozen: Option<Box<Frozen>>,
    pub source: SourceKind,
    pub replay: Option<ReplayStatus>,
    pub view: View,
    /// Views Esc returns to, most recent last.
    pub back: Vec<View>,
    pub help: bool,
    /// 0: keys, 1: legend.
    pub help_page: u8,
    pub help_scroll: u16,
    /// How far the help the last frame drew can scroll (`u16::MAX` until drawn), so `G`/End
    /// lands on its last line and `k` moves up from there at once.
    pub help_max: std::cell::Cell<u16>,
    /// Position of the selected GPU in `State::gpus`.
    pub gpu: usize,
    /// The selected process (on the selected GPU); the identity the selection keeps.
    pub sel_pid: Option<u32>,
    /// Whether a person picked `sel_pid` (keys, a click, an alert). Until then the
    /// selection is the top row, whatever process that is: holding the first process ever
    /// listed would keep one that exited on screen and push the busiest one out of a small
    /// card.
    pub sel_chosen: bool,
    /// Row of `sel_pid` in the selected GPU's list, kept in step by `sync`.
    pub proc_row: usize,
    /// Position in `ZOOMS`.
    pub zoom: usize,
    /// The span `w` goes back to from `all`.
    pub zoom_back: usize,
    /// The selected alert in the panel, and its row (kept in step by `sync`).
    pub sel_alert: Option<AlertId>,
    /// Whether a person picked `sel_alert` (keys, a click). Until then the selection follows
    /// the alert the bar shows, the most severe active one, as alerts come and go.
    pub alert_chosen: bool,
    /// Past alerts whose mark a person has taken off the cards and rows (`A`): UI state,
    /// kept across a replay's seeks (the same alerts are derived again).
    pub acked_past: std::collections::BTreeSet<AlertId>,
    pub alert_row: usize,
    /// Which series the detail chart shows (key `v`).
    pub solo: Solo,
    /// Charts run from zero to the card's total instead of fitting the data (key `f`).
    pub full_scale: bool,
    /// The detail chart shows the whole card instead of the selected process (key `c`).
    pub card_chart: bool,
    /// A distributed job's ranks on a card are one row (key `J` unfolds them).
    pub jobs_folded: bool,
    /// Lines the selected alert's evidence and message are scrolled by.
    pub alert_scroll: u16,
    pub sort: Sort,
    pub filter: String,
    pub prompt: Option<Prompt>,
    /// Ring the terminal bell when an alert is raised or worsens.
    pub bell: bool,
    /// A note shown in the status line for the whole session (e.g. why the demo is playing).
    pub notice: Option<String>,
    /// What the last action did (or why it could not), until the next key.
    pub flash: Option<String>,
    /// File `--record` writes to, for the `● REC` mark.
    pub recording: Option<String>,
    pub quit_reason: Option<String>,
    /// Speed asked for but not yet confirmed by the replay thread: the next `>` doubles
    /// this, not the stale status (typing `>>>>` gives 16x).
    pub speed_req: Option<Speed>,
    /// A replay seek is rebuilding the model: do not move the selection off a process
    /// that has simply not been re-read yet.
    pub settling: bool,
    /// Last process sent SIGTERM: `x`/F9 on it again offers SIGKILL.
    pub terminated: Option<u32>,
    /// The permission check before a kill prompt (replaceable in tests).
    pub may_signal: fn(u32) -> Result<crate::tui::signal::Live, String>,
    /// Where the last frame drew clickable things; rebuilt by every draw.
    pub hits: RefCell<Vec<(Rect, Target)>>,
}

impl App {
    /// Registers `area` as a click target for the next mouse event (called while drawing:
    /// the one thing a render writes, and only into this per-frame list).
    pub fn hit(&self, area: Rect, t: Target) {
        self.hits.borrow_mut().push((area, t));
    }

    /// A view over `pipe`, already configured (sinks, alert thresholds, filter) by the runner.
    pub fn new(source: SourceKind, pipe: Pipeline) -> App {
        let replay = matches!(source, SourceKind::Replay { .. });
        App {
            pipe,
            fleet: None,
            frozen: None,
            source,
            replay: None,
            view: View::Overview,
            back: Vec::new(),
            help: false,
            help_page: 0,
            help_scroll: 0,
            help_max: std::cell::Cell::new(u16::MAX),
            gpu: 0,
            sel_pid: None,
            sel_chosen: false,
            proc_row: 0,
            // A recording is a whole story: it opens fitted; live opens on a span that
            // fills from the right.
            zoom: if replay { ZOOM_ALL } else { ZOOM_LIVE },
            zoom_back: ZOOM_LIVE,
            sel_alert: None,
            alert_chosen: false,
            acked_past: Default::default(),
            alert_row: 0,
            full_scale: false,
            solo: Solo::All,
            card_chart: false,
            jobs_folded: true,
            alert_scroll: 0,
            sort: Sort::default(),
            filter: String::new(),
            prompt: None,
            bell: false,
            notice: None,
            flash: None,
            recording: None,
            quit_reason: None,
            speed_req: None,
            settling: false,
            terminated: None,
            may_signal: crate::tui::signal::may_signal,
            hits: RefCell::new(Vec::new()),
        }
    }

    /// The state views render: the frozen copy while frozen.
    pub fn view_state(&self) -> &State {
        self.frozen
            .as_deref()
            .map_or(&self.pipe.state, |f| &f.state)
    }

    /// The alerts views render: the frozen copy while frozen.
    pub fn view_alerts(&self) -> &AlertEngine {
        self.frozen
            .as_deref()
            .map_or(&self.pipe.alerts, |f| &f.alerts)
    }

    /// What the charts' time axes span.
    pub fn window(&self) -> Window {
        match ZOOMS[self.zoom.min(ZOOMS.len() - 1)].0 {
            0 => Window::All,
            ms => Window::Span(ms),
        }
    }

    pub fn window_label(&self) -> &'static str {
        ZOOMS[self.zoom.min(ZOOMS.len() - 1)].1
    }

    pub fn is_replay(&self) -> bool {
        matches!(self.source, SourceKind::Replay { .. })
    }

    /// The data-time clock of the visible state.
    /// The speed the header shows: what was asked for, before the replay confirms it.
    pub fn speed(&self) -> Option<Speed> {
        self.speed_req.or(self.replay.map(|r| r.speed))
    }

    /// Processes on the GPU with NVML index `gpu`, sorted and filtered as the user chose.
    /// Every process list on screen comes from here, so rows and selection agree.
    pub fn rows_on(&self, gpu: u32) -> Vec<(&ProcState, &ProcGpu)> {
        use crate::tui::selection;
        let s = self.view_state();
        let rows = selection::rows(s, gpu, self.sort, &self.filter);
        selection::group_jobs(s, gpu, rows, &selection::jobs_on(s, gpu), self.jobs_folded)
    }

    /// The job `pid` stands for as one folded row on `gpu`, if it does.
    pub fn folded_job(&self, gpu: u32, pid: u32) -> Option<crate::model::job::Job> {
        use crate::tui::selection;
        if !self.jobs_folded {
            return None;
        }
        let s = self.view_state();
        selection::jobs_on(s, gpu)
            .into_iter()
            .find(|j| selection::job_lead(s, j, gpu) == Some(pid))
    }

    /// PIDs the selection moves through: the selected GPU's rows, or, without any GPU
    /// (no NVML), the companions that report.
    pub fn pids(&self) -> Vec<u32> {
        let s = self.view_state();
        match s.gpus.get(self.gpu) {
            Some(g) => self
                .rows_on(g.info.index)
                .iter()
                .map(|(p, _)| p.info.pid)
                .collect(),
            None if s.gpus.is_empty() => s.companions.by_pid.keys().copied().collect(),
            None => Vec::new(),
        }
    }

    /// Whether `pid` on the GPU at position `gpu` is the selection.
    pub fn is_selected(&self, gpu: Option<usize>, pid: u32) -> bool {
        self.sel_pid == Some(pid) && gpu.is_none_or(|g| g == self.gpu)
    }

    /// The alerts panel's list, as identities.
    pub fn alert_ids(&self) -> Vec<AlertId> {
        self.view_alerts()
            .listed()
            .into_iter()
            .map(AlertId::of)
            .collect()
    }

    /// Active alerts not yet acknowledged (what `A` outside the panel would silence).
    pub fn unacknowledged(&self) -> usize {
        let active = self.view_alerts().active();
        active.iter().filter(|a| !a.silenced).count()
    }

    /// Past alerts whose mark still shows on their card and row (not acknowledged), newest
    /// first.
    pub fn past_marked(&self) -> Vec<&Alert> {
        self.view_alerts()
            .history()
            .filter(|a| !self.acked_past.contains(&AlertId::of(a)))
            .collect()
    }

    /// The alert the bar shows, which the panel opens on: the most severe active one not
    /// acknowledged, else any active one, else the most severe past one (newest first).
    pub fn headline_alert(&self) -> Option<AlertId> {
        let e = self.view_alerts();
        let active = e.active();
        if let Some(a) = active.iter().find(|a| !a.silenced).or(active.first()) {
            return Some(AlertId::of(a));
        }
        let mut worst: Option<&Alert> = None;
        for a in e.history() {
            if worst.is_none_or(|w| a.severity > w.severity) {
                worst = Some(a);
            }
        }
        worst.map(AlertId::of)
    }

    /// Apply one event; afterwards the selection is found again in the new lists.
    pub fn update(&mut self, ev: Event) -> Option<Effect> {
        let keyed = matches!(ev, Event::Input(Input::Key(_)));
        let effect = match ev {
            Event::Frame(f) => self.apply(&f),
            Event::Fleet(news) => self.fleet_news(*news),
            Event::Reset => {
                self.pipe.reset();
                self.settling = true;
                None
            }
            Event::Replay(s) => {
                if self.speed_req == Some(s.speed) {
                    self.speed_req = None;
                }
                self.replay = Some(s);
                self.settling = false;
                None
            }
            Event::Resize => None,
            Event::Suspend => Some(Effect::Suspend { sent: true }),
            Event::Quit(reason) => {
                self.quit_reason = Some(reason);
                Some(Effect::Quit)
            }
            Event::Input(Input::Mouse(m)) => self.mouse(m),
            Event::Input(Input::Key(k)) => {
                self.flash = None;
                match self.prompt.take() {
                    Some(p) => self.prompt_key(p, k),
                    None if crate::tui::keys::interrupt(k) => Some(Effect::Quit),
                    None => action_for(k).and_then(|a| self.act(a)),
                }
            }
        };
        // What a key just did says more than what `sync` finds after it (Enter on the
        // alert of a process no longer kept says so, not that the selection moved).
        let said = if keyed { self.flash.clone() } else { None };
        self.sync();
        if said.is_some() {
            self.flash = said;
        }
        effect
    }

    pub fn apply(&mut self, f: &Frame) -> Option<Effect> {
        self.pipe.apply(f);
        // A recorder that failed is dropped by the pipeline (and says why): so goes `● REC`.
        if self.recording.is_some() && self.pipe.sinks.recorder.is_none() {
            self.recording = None;
        }
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

    /// Find the selected process and alert again in the lists as they are now. A process
    /// that is gone hands the selection to its neighbour, and the status line says so.
    pub fn sync(&mut self) {
        if self.settling {
            return;
        }
        let pids = self.pids();
        let held = if self.sel_chosen {
            self.sel_pid.as_ref()
        } else {
            self.proc_row = 0;
            None
        };
        if let Some((i, found)) = locate(&pids, held, self.proc_row) {
            if let (false, Some(old), true) = (found, self.sel_pid, self.sel_chosen) {
                let s = self.view_state();
                let exists = s.procs.contains_key(&old) || s.companions.get(old).is_some();
                if !exists {
                    self.flash = Some(format!(
                        "PID {old} exited: selection moved to PID {}",
                        pids[i]
                    ));
                }
            }
            self.proc_row = i;
            self.sel_pid = Some(pids[i]);
        } else {
            self.proc_row = 0;
        }
        if !self.alert_chosen {
            self.open_on_headline();
        }
        let ids = self.alert_ids();
        if let Some((i, found)) = locate(&ids, self.sel_alert.as_ref(), self.alert_row) {
            if !found {
                self.alert_scroll = 0;
            }
            self.alert_row = i;
            self.sel_alert = Some(ids[i]);
        }
    }

    fn go(&mut self, v: View) {
        if self.view != v {
            self.back.push(self.view);
            self.back.truncate(8);
            self.view = v;
        }
    }

    fn go_back(&mut self) {
        let top = if self.is_fleet() {
            View::Nodes
        } else {
            View::Overview
        };
        self.view = self.back.pop().unwrap_or(top);
    }

    fn select_gpu(&mut self, pos: usize) {
        if pos != self.gpu {
            self.gpu = pos;
            self.sel_pid = None;
            self.sel_chosen = false;
            self.proc_row = 0;
        }
    }

    fn move_selection(&mut self, delta: isize) {
        if self.view == View::Alerts {
            let ids = self.alert_ids();
            if let Some(last) = ids.len().checked_sub(1) {
                let i = self.alert_row.saturating_add_signed(delta).min(last);
                self.alert_row = i;
                self.sel_alert = Some(ids[i]);
                self.alert_scroll = 0;
                self.alert_chosen = true;
            }
            return;
        }
        let pids = self.pids();
        if let Some(last) = pids.len().checked_sub(1) {
            let i = self
                .proc_row
                .min(last)
                .saturating_add_signed(delta)
                .min(last);
            self.proc_row = i;
            self.sel_pid = Some(pids[i]);
            self.sel_chosen = true;
        }
    }

    fn act(&mut self, a: Action) -> Option<Effect> {
        if self.help {
            return self.help_action(a);
        }
        if self.view == View::Nodes && !matches!(a, Action::Quit | Action::Help | Action::Suspend) {
            return self.node_action(a);
        }
        let gpus = self.view_state().gpus.len().max(1);
        match a {
            Action::Quit => return Some(Effect::Quit),
            Action::Help => {
                self.help = true;
                self.help_page = 0;
                self.help_scroll = 0;
            }
            Action::Back => {
                self.go_back();
                if self.view == View::Nodes {
                    return self.close_node();
                }
            }
            Action::NextGpu => self.select_gpu((self.gpu + 1) % gpus),
            Action::PrevGpu => self.select_gpu((self.gpu + gpus - 1) % gpus),
            Action::Up => self.move_selection(-1),
            Action::Down => self.move_selection(1),
            // The list in focus, never the replay (that is `0`/`$`): Home in the alerts
            // panel once reset the replay and emptied the panel.
            Action::Top => self.move_selection(isize::MIN / 2),
            Action::Bottom => self.move_selection(isize::MAX / 2),
            Action::Suspend => return Some(Effect::Suspend { sent: false }),
            Action::PageUp if self.view == View::Alerts => {
                self.alert_scroll = self.alert_scroll.saturating_sub(5)
            }
            Action::PageDown if self.view == View::Alerts => {
                self.alert_scroll = self.alert_scroll.saturating_add(5)
            }
            Action::PageUp => self.move_selection(-10),
            Action::PageDown => self.move_selection(10),
            Action::Enter if self.view == View::Alerts => self.open_alert(),
            Action::Enter => self.go(View::Detail),
            Action::Alerts if self.view == View::Alerts => self.go_back(),
            Action::Alerts => {
                self.go(View::Alerts);
                self.alert_chosen = false;
                self.alert_scroll = 0;
                self.open_on_headline();
            }
            Action::Ack => self.ack(),
            Action::Sort => {
                self.sort.key = self.sort.key.next();
                self.sort.desc = self.sort.key.default_desc();
                self.flash = Some(format!("sorted by {}", self.sort.label(false)));
            }
            Action::Invert => self.sort.desc = !self.sort.desc,
            Action::Filter => self.prompt = Some(Prompt::Filter),
            Action::Kill => self.ask_kill(),
            Action::Freeze => {
                if self.is_replay() {
                    return Some(Effect::Replay(Control::TogglePause));
                }
                self.frozen = match self.frozen.take() {
                    Some(_) => None,
                    None => Some(Box::new(Frozen {
                        state: self.pipe.state.clone(),
                        alerts: self.pipe.alerts.clone(),
                    })),
                };
            }
            Action::FullScale => self.full_scale = !self.full_scale,
            Action::CardChart => self.card_chart = !self.card_chart,
            Action::FoldJobs => {
                self.jobs_folded = !self.jobs_folded;
                self.flash = Some(if self.jobs_folded {
                    "jobs folded: one row per distributed job (J: its ranks)".into()
                } else {
                    "jobs unfolded: each rank on its own row (J: one row per job)".into()
                });
            }
            Action::ZoomIn => self.zoom_step(false),
            Action::ZoomOut => self.zoom_step(true),
            Action::ZoomAll => self.zoom_all(),
            Action::Solo => {
                self.solo = self.solo.next();
                self.flash = Some(match self.solo {
                    Solo::All => "detail chart: every series (v: one alone)".into(),
                    s => format!("detail chart: {} alone (v: next series)", s.name()),
                });
            }
            _ => return self.replay_action(a),
        }
        None
    }

    /// While help is open: scroll it, turn its page, suspend; any other key closes it, as
    /// in htop (`q` too: it closes help, Ctrl-C quits), and does nothing else.
    fn help_action(&mut self, a: Action) -> Option<Effect> {
        let at = self.help_scroll.min(self.help_max.get());
        match a {
            Action::Help if self.help_page == 0 => {
                self.help_page = 1;
                self.help_scroll = 0;
            }
            Action::Up => self.help_scroll = at.saturating_sub(1),
            Action::Down => self.help_scroll = at.saturating_add(1),
            Action::PageUp => self.help_scroll = at.saturating_sub(8),
            Action::PageDown => self.help_scroll = at.saturating_add(8),
            Action::Top => self.help_scroll = 0,
            Action::Bottom => self.help_scroll = self.help_max.get(),
            Action::Suspend => return Some(Effect::Suspend { sent: false }),
            _ => self.help = false,
        }
        None
    }
}
