//! Input that is not a key-table action: typing into a prompt, and the mouse (a click
//! selects what the last frame drew there, the wheel scrolls).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use super::{App, Effect, Prompt, Target, View};
use crate::tui::keys::Action;
use crate::tui::selection::AlertId;

impl App {
    /// A key while a prompt is open. The filter takes text; a confirmation takes `y`
    /// (or Enter) and treats anything else as "no".
    pub(super) fn prompt_key(&mut self, p: Prompt, k: KeyEvent) -> Option<Effect> {
        if k.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(k.code, KeyCode::Char('c') | KeyCode::Char('d'))
        {
            return Some(Effect::Quit);
        }
        let yes = matches!(
            k.code,
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter
        );
        match p {
            Prompt::Filter if self.view == View::Nodes => {
                let text = self.fleet.as_deref_mut().map(|f| &mut f.selector_text)?;
                match k.code {
                    KeyCode::Enter => {}
                    KeyCode::Esc => text.clear(),
                    KeyCode::Backspace => {
                        text.pop();
                        self.prompt = Some(Prompt::Filter);
                    }
                    KeyCode::Char(c) => {
                        text.push(c);
                        self.prompt = Some(Prompt::Filter);
                    }
                    _ => self.prompt = Some(Prompt::Filter),
                }
                self.selector_typed();
                None
            }
            Prompt::Filter => {
                match k.code {
                    KeyCode::Enter => {}
                    KeyCode::Esc => self.filter.clear(),
                    KeyCode::Backspace => {
                        self.filter.pop();
                        self.prompt = Some(Prompt::Filter);
                    }
                    KeyCode::Char(c) => {
                        self.filter.push(c);
                        self.prompt = Some(Prompt::Filter);
                    }
                    _ => self.prompt = Some(Prompt::Filter),
                }
                None
            }
            Prompt::AckAll(_) if yes => {
                let past: Vec<_> = self.past_marked().into_iter().map(AlertId::of).collect();
                if let Some(f) = &mut self.frozen {
                    f.alerts.ack_all();
                }
                let n = self.pipe.alerts.ack_all() + past.len();
                self.acked_past.extend(past);
                self.flash = Some(match n {
                    1 => "acknowledged 1 alert".into(),
                    n => format!("acknowledged {n} alerts"),
                });
                None
            }
            Prompt::Signal {
                pid, sig, started, ..
            } if yes => Some(Effect::Signal { pid, sig, started }),
            Prompt::AckAll(_) => {
                self.flash = Some("nothing acknowledged".into());
                None
            }
            Prompt::Signal { pid, sig, .. } => {
                self.flash = Some(format!(
                    "{} not sent to PID {pid}",
                    crate::tui::signal::name(sig)
                ));
                None
            }
        }
    }

    pub(super) fn mouse(&mut self, m: MouseEvent) -> Option<Effect> {
        match m.kind {
            MouseEventKind::ScrollDown => return self.wheel(true),
            MouseEventKind::ScrollUp => return self.wheel(false),
            MouseEventKind::Down(MouseButton::Left) => {}
            _ => return None,
        }
        if self.help || self.prompt.is_some() {
            return None;
        }
        // The innermost target wins: a process row inside its GPU card.
        let hit = self
            .hits
            .borrow()
            .iter()
            .filter(|(r, _)| {
                m.column >= r.x
                    && m.column < r.x + r.width
                    && m.row >= r.y
                    && m.row < r.y + r.height
            })
            .min_by_key(|(r, _)| r.area())
            .map(|(_, t)| *t);
        match hit? {
            Target::Gpu(pos) => self.select_gpu(pos),
            Target::Proc { gpu, pid } => {
                self.select_gpu(gpu);
                self.sel_pid = Some(pid);
                self.sel_chosen = true;
            }
            Target::Alert(id) => {
                if self.sel_alert != Some(id) {
                    self.alert_scroll = 0;
                }
                self.sel_alert = Some(id);
                self.alert_chosen = true;
            }
            // As in htop: a click on the sorted column turns the direction round.
            Target::SortBy(key) if self.sort.key == key => self.sort.desc = !self.sort.desc,
            Target::SortBy(key) => {
                self.sort.key = key;
                self.sort.desc = key.default_desc();
                self.flash = Some(format!("sorted by {}", self.sort.label(false)));
            }
            Target::AlertBar => {
                self.go(View::Alerts);
                self.alert_chosen = false;
                self.alert_scroll = 0;
                self.open_on_headline();
            }
        }
        None
    }

    /// The wheel scrolls what is open: help, an alert's message, else the selection.
    fn wheel(&mut self, down: bool) -> Option<Effect> {
        if self.prompt.is_some() {
            return None;
        }
        if self.help || self.view != View::Alerts {
            return self.act(if down { Action::Down } else { Action::Up });
        }
        self.alert_scroll = if down {
            self.alert_scroll.saturating_add(1)
        } else {
            self.alert_scroll.saturating_sub(1)
        };
        None
    }
}
