//! Key bindings as data: the help screen and README's `## Keys` table are both generated
//! from `BINDINGS`, so neither can drift from what the keys do (a test compares README).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for; `App::act` gives each its meaning in the current view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    NextGpu,
    PrevGpu,
    Up,
    Down,
    PageUp,
    PageDown,
    Enter,
    Back,
    Alerts,
    Ack,
    Sort,
    Invert,
    Filter,
    Kill,
    Freeze,
    ZoomIn,
    ZoomOut,
    ZoomAll,
    Solo,
    Faster,
    Slower,
    SeekBack,
    SeekForward,
    PrevMark,
    NextMark,
    ToStart,
    ToEnd,
    Top,
    Bottom,
    Suspend,
    FullScale,
    CardChart,
    Loop,
    FoldJobs,
}

/// One line of the key table: the keys, how help shows them, and what they do.
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

use KeyCode::{
    BackTab, Char, Down, End, Enter, Esc, F, Home, Left, PageDown, PageUp, Right, Tab, Up,
};

/// Every binding, in the order help and README list them. `j`/`k` are a pair (down/up) as in
/// bottom and vim; kill is htop's F9 and `x`, which collides with nothing (help says so).
pub const BINDINGS: &[Binding] = &[
    bind!(
        "q F10",
        "quit (also Ctrl-C); in help: close help",
        Quit,
        Char('q'),
        F(10)
    ),
    bind!(
        "? F1",
        "help; again for the legend of every glyph",
        Help,
        Char('?'),
        F(1)
    ),
    bind!("Tab l →", "next GPU", NextGpu, Tab, Char('l'), Right),
    bind!(
        "S-Tab h ←",
        "previous GPU",
        PrevGpu,
        BackTab,
        Char('h'),
        Left
    ),
    bind!(
        "k ↑",
        "select the process (or alert) above",
        Up,
        Char('k'),
        Up
    ),
    bind!(
        "j ↓",
        "select the process (or alert) below",
        Down,
        Char('j'),
        Down
    ),
    bind!(
        "g Home",
        "first row of the list in focus (processes, alerts, help)",
        Top,
        Char('g'),
        Home
    ),
    bind!(
        "G End",
        "last row of the list in focus",
        Bottom,
        Char('G'),
        End
    ),
    bind!(
        "PgUp PgDn",
        "scroll help or an alert's message",
        PageUp,
        PageUp
    ),
    bind!("", "", PageDown, PageDown),
    bind!(
        "Enter",
        "open the GPU, an alert's GPU and process, or a node",
        Enter,
        Enter
    ),
    bind!(
        "Esc",
        "back to where you came from (from a node: the node list)",
        Back,
        Esc
    ),
    bind!("a", "alerts panel", Alerts, Char('a')),
    bind!(
        "A",
        "acknowledge the selected alert, active or past (all: asks first)",
        Ack,
        Char('A')
    ),
    bind!(
        "s F6",
        "sort: used, peak, growth, PID, name (htop's M: s; no CPU for P)",
        Sort,
        Char('s'),
        F(6)
    ),
    bind!("I", "invert the sort direction", Invert, Char('I')),
    bind!(
        "/ F3 F4",
        "filter by name, user (htop's u) or PID; no tree (t F5) or F2 setup",
        Filter,
        Char('/'),
        F(3),
        F(4)
    ),
    bind!(
        "x F9",
        "SIGTERM the selected process (asks first); again: SIGKILL (htop users: k moves up here)",
        Kill,
        Char('x'),
        F(9)
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
        "zoom in (shorter time span)",
        ZoomIn,
        Char('+'),
        Char('=')
    ),
    bind!(
        "-",
        "zoom out: 10s, 30s, 1m, 5m … 7d (the label is the span the axis shows)",
        ZoomOut,
        Char('-')
    ),
    bind!(
        "w",
        "zoom all: fit the whole history; again: back to the span",
        ZoomAll,
        Char('w')
    ),
    bind!(
        "v",
        "detail chart: one series alone (all, floor, used, resv, alloc, peak)",
        Solo,
        Char('v')
    ),
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
    bind!(
        "J",
        "a row per distributed job, or per rank (node list: across nodes)",
        FoldJobs,
        Char('J')
    ),
    bind!(">", "replay faster (each press doubles)", Faster, Char('>')),
    bind!("<", "replay slower (each press halves)", Slower, Char('<')),
    bind!(
        "[",
        "replay: step back (5 s, 30 s or 5 min by length)",
        SeekBack,
        Char('[')
    ),
    bind!("]", "replay: step forward", SeekForward, Char(']')),
    bind!(
        "{",
        "replay: previous alert (or epoch end when none is behind)",
        PrevMark,
        Char('{')
    ),
    bind!(
        "}",
        "replay: next alert (or epoch end when none is ahead)",
        NextMark,
        Char('}')
    ),
    bind!(
        "0",
        "replay: back to the start (g/Home stay in the list)",
        ToStart,
        Char('0')
    ),
    bind!("$", "replay: jump to the end", ToEnd, Char('$')),
    bind!("L", "replay: loop at the end on/off", Loop, Char('L')),
    Binding {
        keys: &[Char('z')],
        ctrl: true,
        action: Action::Suspend,
        label: "Ctrl-Z",
        desc: "suspend to the shell, as htop does (fg resumes)",
    },
];

/// The bindings help and README list (the unlabelled ones share the line above).
pub fn listed() -> impl Iterator<Item = &'static Binding> {
    BINDINGS.iter().filter(|b| !b.label.is_empty())
}

/// Ctrl-C and Ctrl-D: quit from anywhere, help and prompts included (`q` in help closes it).
pub fn interrupt(key: KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL)
        && matches!(key.code, Char('c') | Char('C') | Char('d'))
}

/// The action a key press asks for (Ctrl-C and Ctrl-D always quit).
pub fn action_for(key: KeyEvent) -> Option<Action> {
    if interrupt(key) {
        return Some(Action::Quit);
    }
    BINDINGS
        .iter()
        .find(|b| {
            b.keys.contains(&key.code) && (b.ctrl == key.modifiers.contains(KeyModifiers::CONTROL))
        })
        .map(|b| b.action)
}

/// README's keys table, generated from `BINDINGS` (tests/it/readme_keys.rs keeps README equal).
pub fn markdown_table() -> String {
    let mut out = String::from("| key | action |\n|---|---|\n");
    for b in listed() {
        let keys: Vec<String> = b.label.split(' ').map(|k| format!("`{k}`")).collect();
        out.push_str(&format!("| {} | {} |\n", keys.join(" "), b.desc));
    }
    out.push_str(
        "\nIn a prompt (filter, confirmation) the keys type text: `Enter` accepts, `Esc` \
         cancels, `y` confirms. In help every key but the scrolling ones closes it. The mouse \
         selects cards, processes and alerts; a click on a column title sorts by it (again: \
         inverts), on the alert bar opens the panel on its alert; the wheel scrolls. \
         How selection, alerts, replay controls, sort, filter and signals behave: \
         [docs/interaction.md](docs/interaction.md).\n",
    );
    out
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
        assert_eq!(action_for(k(F(9))), Some(Action::Kill));
        // htop's filter key filters here too.
        assert_eq!(action_for(k(F(4))), Some(Action::Filter));
        assert_eq!(action_for(k(Char('x'))), Some(Action::Kill));
        assert_eq!(action_for(k(Char('k'))), Some(Action::Up));
        assert_eq!(action_for(k(Char('j'))), Some(Action::Down));
        assert_eq!(action_for(k(Char('g'))), Some(Action::Top));
        assert_eq!(action_for(k(End)), Some(Action::Bottom));
        assert_eq!(action_for(k(Char('$'))), Some(Action::ToEnd));
        assert_eq!(action_for(k(F(10))), Some(Action::Quit));
        assert_eq!(
            action_for(KeyEvent::new(Char('z'), KeyModifiers::CONTROL)),
            Some(Action::Suspend)
        );
        // A plain `z` is not Ctrl-Z.
        assert_eq!(action_for(k(Char('z'))), None);
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
