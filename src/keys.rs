//! Key bindings as data: the help screen is generated from this table.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    NextGpu,
    PrevGpu,
    Up,
    Down,
    Enter,
    Back,
    Alerts,
    Ack,
    Freeze,
    ZoomIn,
    ZoomOut,
    Faster,
    Slower,
    SeekBack,
    SeekForward,
    ToEnd,
    FullScale,
    CardChart,
}

pub struct Binding {
    pub keys: &'static [KeyCode],
    pub ctrl: bool,
    pub action: Action,
    pub label: &'static str,
    pub desc: &'static str,
}

macro_rules! bind {
    ($label:literal, $desc:literal, $action:ident, $($k:expr),+) => {
        Binding { keys: &[$($k),+], ctrl: false, action: Action::$action, label: $label, desc: $desc }
    };
}

use KeyCode::{BackTab, Char, Down, End, Enter, Esc, Left, Right, Tab, Up};

pub const BINDINGS: &[Binding] = &[
    bind!("q", "quit (also Ctrl-C)", Quit, Char('q')),
    bind!("?", "toggle this help", Help, Char('?')),
    bind!("Tab l →", "next GPU", NextGpu, Tab, Char('l'), Right),
    bind!(
        "S-Tab h ←",
        "previous GPU",
        PrevGpu,
        BackTab,
        Char('h'),
        Left
    ),
    bind!("k ↑", "select process above", Up, Char('k'), Up),
    bind!("j ↓", "select process below", Down, Char('j'), Down),
    bind!("Enter", "open the selected GPU's detail view", Enter, Enter),
    bind!("Esc", "back to the overview", Back, Esc),
    bind!("a", "alerts panel", Alerts, Char('a')),
    bind!(
        "A",
        "acknowledge alerts (silenced until they worsen)",
        Ack,
        Char('A')
    ),
    bind!(
        "p space",
        "freeze the view (live) / pause (replay)",
        Freeze,
        Char('p'),
        Char(' ')
    ),
    bind!(
        "+ =",
        "zoom in (shorter time window)",
        ZoomIn,
        Char('+'),
        Char('=')
    ),
    bind!("-", "zoom out (longer time window)", ZoomOut, Char('-')),
    bind!(
        "f",
        "charts: fit the data / the card's full scale",
        FullScale,
        Char('f')
    ),
    bind!(
        "c",
        "detail chart: the card / the selected process",
        CardChart,
        Char('c')
    ),
    bind!(">", "replay faster", Faster, Char('>')),
    bind!("<", "replay slower", Slower, Char('<')),
    bind!("[", "replay: seek back one window", SeekBack, Char('[')),
    bind!(
        "]",
        "replay: seek forward one window",
        SeekForward,
        Char(']')
    ),
    bind!("G End", "replay: jump to the end", ToEnd, Char('G'), End),
];

pub fn action_for(key: KeyEvent) -> Option<Action> {
    if key.modifiers.contains(KeyModifiers::CONTROL)
        && matches!(key.code, Char('c') | Char('C') | Char('d'))
    {
        return Some(Action::Quit);
    }
    BINDINGS
        .iter()
        .find(|b| {
            b.keys.contains(&key.code) && (b.ctrl == key.modifiers.contains(KeyModifiers::CONTROL))
        })
        .map(|b| b.action)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_actions_and_no_key_is_bound_twice() {
        let k = |c| KeyEvent::new(c, KeyModifiers::NONE);
        assert_eq!(action_for(k(Char('q'))), Some(Action::Quit));
        assert_eq!(
            action_for(KeyEvent::new(Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(action_for(k(Tab)), Some(Action::NextGpu));
        assert_eq!(action_for(k(Char(' '))), Some(Action::Freeze));
        assert_eq!(action_for(k(Char('x'))), None);
        let mut all: Vec<KeyCode> = BINDINGS
            .iter()
            .flat_map(|b| b.keys.iter().copied())
            .collect();
        let n = all.len();
        all.sort_by_key(|c| format!("{c:?}"));
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
