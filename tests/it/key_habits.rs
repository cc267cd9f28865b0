//! Key traps, driven through `App::update`: `j`/`k` are a pair, kill is `x`/F9,
//! `g`/`G`/Home/End move in the list in focus and never seek (that is `0`/`$`), any key but
//! the scrolling ones closes help (`q` no longer quits from it), Ctrl-Z asks to suspend, a
//! click on a column title sorts by it and a click on the alert bar opens that alert.

use crate::support::{self, app_from, frames, render, theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use gpumon::source::replay::Control;
use gpumon::tui::app::{App, Effect, SourceKind, View};
use gpumon::tui::event::Event;
use gpumon::tui::selection::SortKey;

const GROW: &str = "h200_torch_grow_shrink.jsonl";
const LEAK: &str = "../corpus/corpus_leak.jsonl";

fn key(app: &mut App, c: KeyCode) -> Option<Effect> {
    app.update(Event::from(KeyEvent::new(c, KeyModifiers::NONE)))
}

fn click(app: &mut App, column: u16, row: u16) {
    app.update(Event::from(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }));
}

/// A replay of the leak corpus up to its first critical alert, with two or more listed.
fn leak_replay() -> App {
    let path = support::fixture(LEAK);
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Default::default(),
    );
    for f in frames(&path) {
        app.update(Event::Frame(f));
        if app.alert_ids().len() >= 2 {
            break;
        }
    }
    assert!(app.alert_ids().len() >= 2, "the corpus raises two alerts");
    app
}

#[test]
fn j_and_k_are_a_pair_and_kill_is_x_or_f9() {
    let mut app = app_from(GROW, Some(35_000));
    app.sync();
    assert!(app.pids().len() >= 3, "{:?}", app.pids());
    key(&mut app, KeyCode::Char('j'));
    key(&mut app, KeyCode::Char('j'));
    assert_eq!(app.proc_row, 2);
    let effect = key(&mut app, KeyCode::Char('k'));
    assert_eq!(app.proc_row, 1, "k moves up");
    assert_eq!(effect, None);
    assert!(app.prompt.is_none(), "k asks nothing");
    assert!(app.flash.is_none(), "k says nothing: {:?}", app.flash);
    // In a replay the kill keys answer with the replay refusal, which names the PID.
    let pid = app.sel_pid.expect("selected");
    for k in [KeyCode::Char('x'), KeyCode::F(9)] {
        key(&mut app, k);
        let f = app.flash.clone().unwrap_or_default();
        assert!(
            f.contains(&format!("PID {pid}")) && f.contains("signals go to live"),
            "{f}"
        );
    }
}

#[test]
fn home_end_g_and_g_move_in_the_process_list_and_never_seek() {
    let mut app = app_from(GROW, Some(35_000));
    app.sync();
    let last = app.pids().len() - 1;
    for (k, want) in [
        (KeyCode::Char('G'), last),
        (KeyCode::Char('g'), 0),
        (KeyCode::End, last),
        (KeyCode::Home, 0),
    ] {
        assert_eq!(key(&mut app, k), None, "{k:?} sends nothing to the replay");
        assert_eq!(app.proc_row, want, "{k:?}");
        assert_eq!(app.sel_pid, Some(app.pids()[want]));
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Detail);
    key(&mut app, KeyCode::End);
    assert_eq!(app.proc_row, last, "the detail view's list too");
}

#[test]
fn home_and_end_in_the_alerts_panel_move_there_and_0_and_dollar_seek() {
    let mut app = leak_replay();
    let start = app.pipe.state.header.as_ref().map_or(0, |h| h.started);
    app.replay = Some(gpumon::source::replay::ReplayStatus {
        pos: start + 30_000,
        start,
        end: Some(start + 120_000),
        speed: gpumon::source::replay::Speed::Times(1.0),
        paused: true,
        ended: false,
        following: false,
        looping: false,
    });
    key(&mut app, KeyCode::Char('a'));
    assert_eq!(app.view, View::Alerts);
    let ids = app.alert_ids();
    for (k, want) in [(KeyCode::End, ids.len() - 1), (KeyCode::Home, 0)] {
        assert_eq!(key(&mut app, k), None, "{k:?} does not seek");
        assert_eq!(app.alert_row, want, "{k:?}");
        assert_eq!(app.sel_alert, Some(ids[want]));
    }
    key(&mut app, KeyCode::Char('G'));
    assert_eq!(app.alert_row, ids.len() - 1);
    assert_eq!(app.view, View::Alerts, "still in the panel");
    assert_eq!(
        key(&mut app, KeyCode::Char('0')),
        Some(Effect::Replay(Control::SeekTo(start)))
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('$')),
        Some(Effect::Replay(Control::ToEnd))
    );
}

#[test]
fn any_key_but_scrolling_closes_help_and_only_ctrl_c_quits_from_it() {
    let mut app = app_from(GROW, Some(35_000));
    // Every key help documents as closing it, and one that just acts elsewhere (`s`).
    for k in [
        KeyCode::Char('q'),
        KeyCode::F(10),
        KeyCode::Esc,
        KeyCode::F(1),
        KeyCode::Char('s'),
    ] {
        key(&mut app, KeyCode::Char('?'));
        assert!(app.help);
        let sort = app.sort;
        if k == KeyCode::F(1) {
            key(&mut app, k); // the first F1 turns to the legend, the second closes
        }
        assert_eq!(key(&mut app, k), None, "{k:?} does not quit");
        assert!(!app.help, "{k:?} closes help");
        assert_eq!(app.sort, sort, "{k:?} only closed help");
    }
    key(&mut app, KeyCode::Char('?'));
    let ctrl_c = app.update(Event::from(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert_eq!(ctrl_c, Some(Effect::Quit));
}

#[test]
fn end_lands_on_the_last_line_of_help_and_k_climbs_from_there() {
    let mut app = app_from(GROW, Some(35_000));
    key(&mut app, KeyCode::Char('?'));
    render(&app, 40, 12, &theme(false));
    key(&mut app, KeyCode::End);
    let screen = render(&app, 40, 12, &theme(false));
    let max = app.help_max.get();
    assert!(max > 10, "help is longer than a 40x12 pane: {max}");
    assert_eq!(app.help_scroll, max);
    assert!(!screen.contains("more lines"), "at the end:\n{screen}");
    key(&mut app, KeyCode::Char('k'));
    assert_eq!(app.help_scroll, max - 1, "one key moves up at once");
    key(&mut app, KeyCode::Char('g'));
    assert_eq!(app.help_scroll, 0);
    assert!(app.help);
}

#[test]
fn ctrl_z_asks_the_loop_to_suspend_even_in_help() {
    let mut app = app_from(GROW, Some(35_000));
    let ctrl_z = || Event::from(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL));
    let key_z = Some(Effect::Suspend { sent: false });
    assert_eq!(app.update(ctrl_z()), key_z);
    key(&mut app, KeyCode::Char('?'));
    assert_eq!(app.update(ctrl_z()), key_z);
    assert!(app.help, "help is still open after fg");
    assert_eq!(
        app.update(Event::Suspend),
        Some(Effect::Suspend { sent: true })
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('z')),
        None,
        "a plain z is no key"
    );
}

/// Column of `title` on the screen row `y`.
fn column_of(screen: &str, y: usize, title: &str) -> u16 {
    let line = screen.lines().nth(y).expect("row");
    let at = line
        .find(title)
        .unwrap_or_else(|| panic!("{title} in {line}"));
    line[..at].chars().count() as u16
}

#[test]
fn a_click_on_a_column_title_sorts_by_it_and_again_inverts() {
    let mut app = app_from(GROW, Some(35_000));
    app.sync();
    for (w, h) in [(80, 24), (120, 40), (40, 12)] {
        let screen = render(&app, w, h, &theme(false));
        let y = screen
            .lines()
            .position(|l| l.contains("PID") && l.contains("COMMAND"))
            .unwrap_or_else(|| panic!("titles at {w}x{h}:\n{screen}"));
        let x = column_of(&screen, y, "PID");
        click(&mut app, x + 1, y as u16);
        assert_eq!(app.sort.key, SortKey::Pid, "{w}x{h}");
        assert!(!app.sort.desc, "PID sorts smallest first");
        let pids: Vec<u32> = app.rows_on(0).iter().map(|(p, _)| p.info.pid).collect();
        assert!(pids.is_sorted(), "{pids:?}");
        let screen = render(&app, w, h, &theme(false));
        click(&mut app, column_of(&screen, y, "PID▲"), y as u16);
        assert!(app.sort.desc, "a second click inverts ({w}x{h})");
        let screen = render(&app, w, h, &theme(false));
        click(&mut app, column_of(&screen, y, "COMMAND"), y as u16);
        assert_eq!(app.sort.key, SortKey::Name, "{w}x{h}");
        let screen = render(&app, w, h, &theme(false));
        // The first USED after COMMAND: the column, not `USED OVER TIME` (no sort of its own).
        let line = screen.lines().nth(y).expect("the titles row");
        let after = line.find("COMMAND").expect("COMMAND");
        let used = after + line[after..].find("USED").expect("USED");
        let x = line[..used].chars().count() as u16;
        click(&mut app, x, y as u16);
        assert_eq!(app.sort.key, SortKey::Used, "{w}x{h}");
        assert!(app.sort.desc);
        if let Some(over) = line.find("USED OVER TIME") {
            click(&mut app, line[..over].chars().count() as u16, y as u16);
            assert_eq!(
                app.sort.key,
                SortKey::Used,
                "the history title sorts nothing"
            );
            assert!(app.sort.desc);
        }
    }
    // The detail view's table too.
    key(&mut app, KeyCode::Enter);
    let screen = render(&app, 120, 40, &theme(false));
    let y = screen
        .lines()
        .position(|l| l.contains("PID") && l.contains("COMMAND"))
        .expect("detail titles");
    click(&mut app, column_of(&screen, y, "PEAK"), y as u16);
    assert_eq!(app.sort.key, SortKey::Peak);
}

#[test]
fn a_click_on_the_alert_bar_opens_the_panel_on_its_alert() {
    let mut app = leak_replay();
    let shown = app.pipe.alerts.visible().first().map(|a| a.key());
    assert!(shown.is_some());
    // Pick another alert first: the click must still land on the bar's.
    key(&mut app, KeyCode::Char('a'));
    key(&mut app, KeyCode::End);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Overview);
    for (w, h) in [(80u16, 24u16), (40, 12)] {
        let screen = render(&app, w, h, &theme(false));
        let bar = h - 2;
        let line = screen.lines().nth(usize::from(bar)).unwrap_or("");
        assert!(
            line.contains('⚠') || line.contains('‼'),
            "the bar:\n{screen}"
        );
        click(&mut app, 3, bar);
        assert_eq!(app.view, View::Alerts, "{w}x{h}");
        assert_eq!(app.sel_alert.map(|a| a.key), shown, "{w}x{h}");
        key(&mut app, KeyCode::Esc);
    }
}
