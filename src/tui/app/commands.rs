//! What the acting keys do: alerts (go to, acknowledge), signals (ask, then report),
//! and replay controls (speed from the last requested value, seek steps that fit).

use super::{App, Effect, Prompt, View};
use crate::source::replay::Control;
use crate::source::replay::{ReplayStatus, Speed};
use crate::tui::keys::Action;

impl App {
    /// The panel opens on the alert the bar shows (the most severe active one), so the
    /// row a person came for is selected and on screen even in a 40x12 pane; until a person
    /// picks another, the selection follows it (`sync`).
    pub(super) fn open_on_headline(&mut self) {
        let ids = self.alert_ids();
        let Some(id) = self.headline_alert() else {
            return;
        };
        if let Some(i) = ids.iter().position(|x| *x == id) {
            if self.sel_alert != Some(id) {
                self.alert_scroll = 0;
            }
            self.sel_alert = Some(id);
            self.alert_row = i;
        }
    }

    /// Enter on an alert: its GPU's detail with its process selected, whether the process
    /// still runs or has ended (an alert in the panel keeps its process listed); never
    /// another process in its place.
    pub(super) fn open_alert(&mut self) {
        let Some(id) = self.sel_alert else { return };
        let s = self.view_state();
        let Some(pos) = s.gpus.iter().position(|g| g.info.index == id.key.gpu) else {
            self.flash = Some(format!("GPU {} is not in this view", id.key.gpu));
            return;
        };
        if let Some(pid) = id.key.pid {
            let listed = s
                .procs
                .get(&pid)
                .is_some_and(|p| p.gpus.contains_key(&id.key.gpu));
            if !listed {
                self.flash = Some(format!(
                    "PID {pid} is not listed on GPU {} (no longer kept, or never seen by NVML): \
                     its evidence is here",
                    id.key.gpu
                ));
                return;
            }
        }
        self.select_gpu(pos);
        if let Some(pid) = id.key.pid {
            if !self.pids().contains(&pid) && !self.filter.is_empty() {
                self.filter.clear();
            }
            self.sel_pid = Some(pid);
            self.sel_chosen = true;
        }
        self.go(View::Detail);
    }

    /// `A`: the selected alert in the panel (an active one is silenced until it worsens, a
    /// past one's mark leaves its card and row); elsewhere all of them, after asking.
    pub(super) fn ack(&mut self) {
        if self.view == View::Alerts {
            let Some(id) = self.sel_alert else { return };
            if let Some(f) = &mut self.frozen {
                f.alerts.ack(&id.key);
            }
            self.flash = Some(if self.pipe.alerts.ack(&id.key) {
                "acknowledged: silenced until it worsens".into()
            } else if self.acked_past.insert(id) {
                "acknowledged: its mark leaves the card and the row".into()
            } else {
                "already acknowledged".into()
            });
            return;
        }
        let n = self.unacknowledged() + self.past_marked().len();
        if n == 0 {
            self.flash = Some("no alerts to acknowledge".into());
        } else {
            self.prompt = Some(Prompt::AckAll(n));
        }
    }

    /// `x`/F9: ask before signalling the selected process (SIGKILL if it already got SIGTERM).
    pub(super) fn ask_kill(&mut self) {
        let pid = match (self.view, self.sel_alert) {
            (View::Alerts, Some(id)) => id.key.pid,
            _ => self.sel_pid,
        };
        let Some(pid) = pid else {
            self.flash = Some("no process selected".into());
            return;
        };
        if self.is_replay() {
            self.flash = Some(format!(
                "replay: PID {pid} ran when this was recorded; signals go to live processes only"
            ));
            return;
        }
        // An ended process's PID may already belong to another process: never signal it.
        if let Some(e) = self.view_state().procs.get(&pid).and_then(|p| p.exit) {
            self.flash = Some(format!(
                "PID {pid} has ended ({}): nothing to signal",
                e.cause.label()
            ));
            return;
        }
        let live = match (self.may_signal)(pid) {
            Ok(l) => l,
            Err(why) => {
                self.flash = Some(why);
                return;
            }
        };
        let sig = if self.terminated == Some(pid) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        // What a companion said about itself is a claim; /proc is what the signal
        // reaches. When they differ the pid was reused or the peer lied: no prompt.
        let claimed = self
            .view_state()
            .companions
            .get(pid)
            .and_then(|c| c.hello.as_ref()?.cmdline.clone());
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let now = crate::fmt::inert(&words(&live.cmdline));
        if let Some(claimed) = claimed.filter(|c| words(c) != words(&live.cmdline)) {
            self.flash = Some(format!(
                "PID {pid} is now '{}', not '{}' as its companion said: not signalling it",
                cut(&now, 40),
                cut(&crate::fmt::inert(&claimed), 40)
            ));
            return;
        }
        self.prompt = Some(Prompt::Signal {
            pid,
            sig,
            what: format!("PID {pid} {}", cut(&now, 40))
                .trim_end()
                .to_string(),
            started: live.started,
        });
    }

    /// The loop sent (or failed to send) a confirmed signal.
    pub fn signal_done(&mut self, pid: u32, sig: i32, result: Result<String, String>) {
        if result.is_ok() && sig == libc::SIGTERM {
            self.terminated = Some(pid);
        }
        self.flash = Some(match result {
            Ok(m) if sig == libc::SIGTERM => format!("{m}; x again offers SIGKILL"),
            Ok(m) | Err(m) => m,
        });
    }

    /// Speed, seek, marks, start/end and loop: replay only (live says where they work).
    pub(super) fn replay_action(&mut self, a: Action) -> Option<Effect> {
        let Some(r) = self.replay.filter(|_| self.is_replay()) else {
            self.flash = Some("replay controls work in `gpumon replay FILE`".into());
            return None;
        };
        // --follow plays the newest data as it arrives: there is no speed and no going back
        // (a seek would rush back to the end at once). Said, not silently dropped.
        if r.following && !matches!(a, Action::ToEnd) {
            // Whole at 40 columns: the flash line is one row.
            self.flash = Some("--follow: no seeking or speed changes".into());
            return None;
        }
        let c = match a {
            Action::Faster | Action::Slower => {
                let cur = self.speed().unwrap_or(Speed::Times(1.0));
                let next = if a == Action::Faster {
                    cur.faster()
                } else {
                    cur.slower()
                };
                self.speed_req = Some(next);
                Control::SetSpeed(next)
            }
            Action::SeekBack => Control::Seek(-seek_step(r)),
            Action::SeekForward => Control::Seek(seek_step(r)),
            Action::PrevMark => Control::Mark(-1),
            Action::NextMark => Control::Mark(1),
            Action::ToStart => Control::SeekTo(r.start),
            Action::ToEnd => Control::ToEnd,
            Action::Loop => Control::ToggleLoop,
            _ => return None,
        };
        Some(Effect::Replay(c))
    }
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A seek step that fits the recording: about a twentieth of it, as 5 s, 30 s or 5 min,
/// so a 2-minute file moves 5 s and a day-long one 5 min.
pub(super) fn seek_step(r: ReplayStatus) -> i64 {
    let total = r.end.unwrap_or(r.pos).saturating_sub(r.start);
    [300_000, 30_000]
        .into_iter()
        .find(|&s| total / 20 >= s)
        .unwrap_or(5_000)
}
