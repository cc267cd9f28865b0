//! The htop hands, driven through `App::update` with real key and mouse events over the
//! bundled recordings, and insta snapshots of the legend, the alerts panel with a long
//! message, and the header in every state.

use crate::support::{self, app_from, frames, render, theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use gpumon::source::replay::Control;
use gpumon::source::replay::{ReplayStatus, Speed};
use gpumon::tui::app::{App, Effect, SourceKind, View};
use gpumon::tui::event::Event;

const GROW: &str = "h200_torch_grow_shrink.jsonl";
const LEAK: &str = "../corpus/corpus_leak.jsonl";

fn key(app: &mut App, c: KeyCode) -> Option<Effect> {
    app.update(Event::from(KeyEvent::new(c, KeyModifiers::NONE)))
}

/// How one header state differs from plain playback.
type Change = Box<dyn Fn(&mut ReplayStatus)>;

fn status(start: i64, pos_s: i64, end_s: i64) -> ReplayStatus {
    ReplayStatus {
        pos: start + pos_s * 1000,
        start,
        end: Some(start + end_s * 1000),
        speed: Speed::Times(1.0),
        paused: false,
        ended: false,
        following: false,
        looping: false,
    }
}

/// Move the selection with the arrow keys until it is on `pid`.
fn select(app: &mut App, pid: u32) {
    for _ in 0..5 {
        key(app, KeyCode::Up);
    }
    for _ in 0..10 {
        if app.sel_pid == Some(pid) {
            return;
        }
        key(app, KeyCode::Down);
    }
    panic!("PID {pid} not among {:?}", app.pids());
}

fn start_of(app: &App) -> i64 {
    app.pipe.state.header.as_ref().map_or(0, |h| h.started)
}

fn first_line(app: &App, w: u16, ascii: bool) -> String {
    render(app, w, 6, &theme(ascii))
        .lines()
        .next()
        .unwrap_or("")
        .trim_end()
        .to_string()
}

#[test]
fn header_in_every_state() {
    let mut out = String::new();
    let mut live = app_from(GROW, Some(35_000));
    live.source = SourceKind::Live { interval_ms: 1000 };
    for (what, w) in [("live", 80), ("live 40", 40)] {
        out.push_str(&format!("{what:>22}: {}\n", first_line(&live, w, false)));
    }
    live.update(Event::from(KeyEvent::new(
        KeyCode::Char('p'),
        KeyModifiers::NONE,
    )));
    out.push_str(&format!(
        "{:>22}: {}\n",
        "live frozen",
        first_line(&live, 80, false)
    ));
    live.frozen = None;
    live.recording = Some("/tmp/run.gpumon.jsonl".into());
    out.push_str(&format!(
        "{:>22}: {}\n",
        "live --record",
        first_line(&live, 80, false)
    ));
    out.push_str(&format!(
        "{:>22}: {}\n",
        "live --record ascii",
        first_line(&live, 80, true)
    ));

    let mut rp = app_from(GROW, Some(35_000));
    let t0 = start_of(&rp);
    let states: [(&str, Change); 7] = [
        ("replay playing", Box::new(|_| {})),
        ("replay paused", Box::new(|s| s.paused = true)),
        (
            "replay end",
            Box::new(|s| {
                s.ended = true;
                s.pos = s.end.unwrap_or(s.pos);
            }),
        ),
        (
            "replay end paused",
            Box::new(|s| {
                s.ended = true;
                s.paused = true;
                s.pos = s.end.unwrap_or(s.pos);
            }),
        ),
        (
            "replay looping 16x",
            Box::new(|s| {
                s.looping = true;
                s.speed = Speed::Times(16.0);
            }),
        ),
        (
            "replay following",
            Box::new(|s| {
                s.ended = true;
                s.following = true;
                s.end = None;
            }),
        ),
        (
            "replay past an hour",
            Box::new(|s| {
                s.pos = s.start + 3_725_000;
                s.end = Some(s.start + 7_200_000);
            }),
        ),
    ];
    for (what, change) in states {
        let mut s = status(t0, 35, 80);
        change(&mut s);
        rp.update(Event::Replay(s));
        for w in [80, 40] {
            out.push_str(&format!(
                "{:>22}: {}\n",
                format!("{what} {w}"),
                first_line(&rp, w, false)
            ));
        }
    }
    rp.source = SourceKind::Replay {
        file: "demo.gpumon.jsonl".into(),
        demo: true,
    };
    out.push_str(&format!("{:>22}: {}\n", "demo", first_line(&rp, 80, false)));
    assert!(out.contains("● REC"), "{out}");
    assert!(out.contains("0:35 / 1:20"), "{out}");
    assert!(out.contains("1:02:05 / 2:00:00"), "{out}");
    assert!(out.contains("end (paused)"), "{out}");
    insta::assert_snapshot!(out);
}

/// The corpus leak run 70 s in, with the alerts panel on the leak alert of PID 786.
fn leak_panel() -> App {
    let mut app = app_from(LEAK, Some(70_000));
    key(&mut app, KeyCode::Char('a'));
    for _ in 0..10 {
        let on = app.sel_alert.map(|a| a.key);
        if on.is_some_and(|k| k.pid == Some(786) && format!("{:?}", k.kind) == "Growth") {
            break;
        }
        key(&mut app, KeyCode::Down);
    }
    assert_eq!(
        app.sel_alert.and_then(|a| a.key.pid),
        Some(786),
        "leak alert of 786"
    );
    app
}

#[test]
fn alert_panel_60x15_reads_the_whole_message_by_scrolling() {
    let mut app = leak_panel();
    let first = render(&app, 60, 15, &theme(false));
    assert!(
        first.contains("more lines: PgDn"),
        "says there is more:\n{first}"
    );
    assert!(
        first.contains("PID 786 on GPU 1"),
        "pid@gpu written out:\n{first}"
    );
    insta::assert_snapshot!("alert_panel_60x15", first);
    let message = app
        .pipe
        .alerts
        .active()
        .into_iter()
        .find(|a| a.pid == Some(786))
        .map(|a| a.message.clone())
        .expect("leak alert");
    let last_word = message
        .split_whitespace()
        .last()
        .expect("words")
        .to_string();
    let mut seen = first.clone();
    for _ in 0..20 {
        key(&mut app, KeyCode::PageDown);
        seen.push_str(&render(&app, 60, 15, &theme(false)));
    }
    assert!(
        seen.contains(&last_word),
        "the message's end {last_word:?} is reachable"
    );
    insta::assert_snapshot!(
        "alert_panel_60x15_scrolled",
        render(&app, 60, 15, &theme(false))
    );
}

#[test]
fn alert_panel_40x12_long_message() {
    let app = leak_panel();
    let screen = render(&app, 40, 12, &theme(false));
    assert!(screen.contains("PgDn"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn legend_page_of_help() {
    let mut app = app_from(GROW, Some(35_000));
    key(&mut app, KeyCode::Char('?'));
    key(&mut app, KeyCode::Char('?'));
    let screen = render(&app, 100, 36, &theme(false));
    // The legend is longer than one 36-row screen: what the first screen lacks must be
    // there once scrolled.
    let mut seen = screen.clone();
    for _ in 0..90 {
        key(&mut app, KeyCode::Down);
        seen.push_str(&render(&app, 100, 36, &theme(false)));
    }
    app.help_scroll = 0;
    for t in gpumon::tui::ui::legend::LEGEND {
        assert!(
            seen.contains(t.meaning),
            "legend lacks {:?}:\n{seen}",
            t.sym
        );
    }
    insta::assert_snapshot!("legend_100x36", screen);
    let small = render(&app, 40, 12, &theme(false));
    assert!(small.contains("more lines"), "{small}");
    insta::assert_snapshot!("legend_40x12", small);
    for _ in 0..40 {
        key(&mut app, KeyCode::Down);
    }
    let end = render(&app, 40, 12, &theme(true));
    assert!(end.is_ascii(), "{end}");
    insta::assert_snapshot!("legend_40x12_scrolled_ascii", end);
}

#[test]
fn speed_keys_accumulate_before_the_replay_confirms() {
    let mut app = app_from(GROW, Some(10_000));
    let t0 = start_of(&app);
    app.update(Event::Replay(status(t0, 10, 80)));
    let mut last = None;
    for _ in 0..4 {
        last = key(&mut app, KeyCode::Char('>'));
    }
    assert_eq!(
        last,
        Some(Effect::Replay(Control::SetSpeed(Speed::Times(16.0))))
    );
    // The replay thread still reports 1x (stale): the next press builds on 16x, not 1x.
    app.update(Event::Replay(status(t0, 11, 80)));
    assert_eq!(
        key(&mut app, KeyCode::Char('<')),
        Some(Effect::Replay(Control::SetSpeed(Speed::Times(8.0))))
    );
    assert_eq!(
        key(&mut app, KeyCode::Char(']')),
        Some(Effect::Replay(Control::Seek(5_000)))
    );
}

#[test]
fn selection_keeps_its_pid_through_resorts_and_a_seek_rebuild_and_moves_when_it_exits() {
    let path = support::fixture(GROW);
    let all = frames(&path);
    let t0 = all[0].time();
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Default::default(),
    );
    let feed = |app: &mut App, from: i64, to: i64| {
        for f in all
            .iter()
            .filter(|f| f.time() > t0 + from && f.time() <= t0 + to)
        {
            app.update(Event::Frame(f.clone()));
        }
    };
    app.update(Event::Frame(all[0].clone()));
    feed(&mut app, -1, 40_000);
    select(&mut app, 461);
    let row_before = app.proc_row;
    feed(&mut app, 40_000, 44_000);
    assert_eq!(app.sel_pid, Some(461));
    assert_ne!(app.proc_row, row_before, "461 moved down a row at 43 s");
    // A seek back: Reset, then the rebuild re-reads frames; 461 is absent at first.
    app.update(Event::Reset);
    app.update(Event::Frame(all[0].clone()));
    feed(&mut app, -1, 9_000);
    app.update(Event::Replay(status(t0, 9, 80)));
    assert_eq!(app.sel_pid, Some(461), "kept across the rebuild");
    assert!(app.flash.is_none(), "{:?}", app.flash);
    // 461 is listed until the end; 510 and 462 leave NVML, stay listed as exited for
    // `keep_exited` (10 min live), then go.
    feed(&mut app, 9_000, 80_000);
    select(&mut app, 462);
    let exit = app.pipe.state.procs[&462]
        .exit
        .expect("462 ended before 80 s");
    let t_end = exit.at + gpumon::model::state::KEEP_EXITED_LIVE_MS + 1;
    let mut last = all
        .iter()
        .rev()
        .find(|f| matches!(f, gpumon::model::frame::Frame::Tick(_)))
        .cloned();
    if let Some(gpumon::model::frame::Frame::Tick(t)) = last.as_mut() {
        t.t = t_end;
    }
    app.update(Event::Frame(last.expect("a tick")));
    let flash = app.flash.clone().unwrap_or_default();
    assert!(flash.contains("PID 462 exited"), "{flash}");
    assert_ne!(app.sel_pid, Some(462));
}

#[test]
fn click_selects_a_process_and_wheel_moves_the_selection() {
    let mut app = app_from(GROW, Some(35_000));
    app.sync();
    let screen = render(&app, 80, 24, &theme(false));
    let y = screen
        .lines()
        .position(|l| l.contains(" 462 "))
        .expect("462 drawn") as u16;
    assert_ne!(app.sel_pid, Some(462));
    let click = |row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: 10,
        row,
        modifiers: KeyModifiers::NONE,
    };
    app.update(Event::from(click(y)));
    assert_eq!(app.sel_pid, Some(462));
    let before = app.proc_row;
    app.update(Event::from(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        ..click(0)
    }));
    assert_eq!(app.proc_row, before.saturating_sub(1));
}

#[test]
fn sort_cycles_and_the_header_shows_column_and_direction() {
    let mut app = app_from(GROW, Some(35_000));
    let mut heads = Vec::new();
    for _ in 0..5 {
        let screen = render(&app, 80, 24, &theme(false));
        let head = screen
            .lines()
            .find(|l| l.contains("PID"))
            .unwrap_or("")
            .to_string();
        heads.push(head);
        key(&mut app, KeyCode::F(6));
    }
    for (h, want) in heads
        .iter()
        .zip(["USED▼", "PEAK▼", "GROWTH▼", "PID▲", "COMMAND▲"])
    {
        assert!(h.contains(want), "{want} in {h}");
    }
    let pids: Vec<u32> = app.rows_on(0).iter().map(|(p, _)| p.info.pid).collect();
    key(&mut app, KeyCode::Char('s'));
    key(&mut app, KeyCode::Char('s'));
    key(&mut app, KeyCode::Char('s'));
    let by_pid: Vec<u32> = app.rows_on(0).iter().map(|(p, _)| p.info.pid).collect();
    assert!(by_pid.is_sorted(), "{by_pid:?}");
    key(&mut app, KeyCode::Char('I'));
    let rev: Vec<u32> = app.rows_on(0).iter().map(|(p, _)| p.info.pid).collect();
    assert_eq!(rev.iter().rev().copied().collect::<Vec<_>>(), by_pid);
    assert_eq!(pids.len(), by_pid.len());
}

#[test]
fn kill_asks_naming_the_pid_refuses_in_replay_and_escalates_to_sigkill() {
    let mut app = app_from(GROW, Some(35_000));
    app.sync();
    key(&mut app, KeyCode::Char('x'));
    let flash = app.flash.clone().unwrap_or_default();
    assert!(flash.starts_with("replay: PID"), "{flash}");
    assert!(app.prompt.is_none());
    app.source = SourceKind::Live { interval_ms: 1000 };
    app.may_signal = |_| {
        Ok(live(
            "python3 /work/main/scripts/gpu/grow_shrink.py 70 2 24",
        ))
    };
    let pid = app.sel_pid.expect("selected");
    key(&mut app, KeyCode::F(9));
    let footer = render(&app, 100, 24, &theme(false));
    assert!(
        footer.contains(&format!("send SIGTERM to PID {pid} python3")),
        "{footer}"
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('n')),
        None,
        "anything but y cancels"
    );
    key(&mut app, KeyCode::Char('x'));
    let e = key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        e,
        Some(Effect::Signal {
            pid,
            sig: libc::SIGTERM,
            started: 7
        })
    );
    app.signal_done(pid, libc::SIGTERM, Ok(format!("SIGTERM sent to PID {pid}")));
    key(&mut app, KeyCode::Char('x'));
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        Some(Effect::Signal {
            pid,
            sig: libc::SIGKILL,
            started: 7
        })
    );
    app.may_signal = |pid| Err(format!("PID {pid} belongs to another user"));
    key(&mut app, KeyCode::Char('x'));
    assert!(app.prompt.is_none());
    assert!(
        app.flash
            .clone()
            .unwrap_or_default()
            .contains("another user")
    );
}

fn live(cmdline: &str) -> gpumon::tui::signal::Live {
    gpumon::tui::signal::Live {
        cmdline: cmdline.into(),
        started: 7,
    }
}

/// The kill prompt once named the command line a companion reported about
/// itself, so a peer under a reused pid got root's `sleep` killed as "python3 train.py".
/// The prompt names what /proc says, and refuses when that is not what the companion said.
#[test]
fn kill_names_what_proc_says_and_refuses_when_the_companion_said_otherwise() {
    // pid 578's companion said "python3 scripts/gpu/companion_check.py --out …" (its bye
    // comes at 4.9 s).
    let mut app = app_from("h200_torch_companion.jsonl", Some(3_000));
    app.sync();
    app.source = SourceKind::Live { interval_ms: 1000 };
    let pid = 578;
    app.sel_pid = Some(pid);
    app.may_signal = |_| Ok(live("sleep 600"));
    key(&mut app, KeyCode::Char('x'));
    assert!(
        app.prompt.is_none(),
        "prompted to signal a process that is not the companion"
    );
    let flash = app.flash.clone().unwrap_or_default();
    assert!(
        flash.contains(&format!("PID {pid} is now 'sleep 600'"))
            && flash.contains("companion_check.py"),
        "{flash}"
    );
    app.may_signal = |_| {
        Ok(live(
            "python3 scripts/gpu/companion_check.py --out /tmp/tmp.0TwqJQv268/companion \u{1b}]0;x\u{7}",
        ))
    };
    key(&mut app, KeyCode::Char('x'));
    assert!(
        app.prompt.is_none(),
        "an argument the companion did not report"
    );
    app.may_signal = |_| {
        Ok(live(
            "python3  scripts/gpu/companion_check.py --out /tmp/tmp.0TwqJQv268/companion",
        ))
    };
    key(&mut app, KeyCode::Char('x'));
    let footer = render(&app, 120, 24, &theme(false));
    assert!(
        footer.contains(&format!(
            "send SIGTERM to PID {pid} python3 scripts/gpu/companion"
        )),
        "{footer}"
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        Some(Effect::Signal {
            pid,
            sig: libc::SIGTERM,
            started: 7
        })
    );
}

#[test]
fn acknowledge_one_alert_in_the_panel_and_all_only_after_confirming() {
    let mut app = leak_panel();
    let n = app.unacknowledged();
    assert!(n >= 2, "{n}");
    key(&mut app, KeyCode::Char('A'));
    let silenced = app
        .pipe
        .alerts
        .active()
        .iter()
        .filter(|a| a.silenced)
        .count();
    assert_eq!(silenced, 1, "only the selected one");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Overview);
    key(&mut app, KeyCode::Char('A'));
    key(&mut app, KeyCode::Char('x'));
    assert_eq!(
        app.pipe
            .alerts
            .active()
            .iter()
            .filter(|a| a.silenced)
            .count(),
        1
    );
    key(&mut app, KeyCode::Char('A'));
    key(&mut app, KeyCode::Char('y'));
    assert!(app.pipe.alerts.active().iter().all(|a| a.silenced));
}

#[test]
fn alert_marks_on_the_process_row_and_the_card() {
    let app = app_from(LEAK, Some(70_000));
    let screen = render(&app, 100, 40, &theme(false));
    let row = screen
        .lines()
        .find(|l| l.contains(" 786 "))
        .expect("786 listed");
    assert!(row.contains('⚠') || row.contains('‼'), "{row}");
    let card = screen
        .lines()
        .find(|l| l.contains("GPU 1 ·"))
        .expect("GPU 1 card");
    assert!(card.contains('⚠') || card.contains('‼'), "{card}");
}

#[test]
fn the_overview_scrolls_a_card_to_keep_the_selection_on_screen() {
    let mut app = app_from("h200x2_cvd.jsonl", Some(20_000));
    app.gpu = 1;
    app.sel_pid = None;
    app.sync();
    for _ in 0..10 {
        key(&mut app, KeyCode::Down);
    }
    let pid = app.sel_pid.expect("selection");
    assert!(app.proc_row >= 4, "{}", app.proc_row);
    let screen = render(&app, 80, 24, &theme(false));
    assert!(
        screen.contains(&format!(" {pid} ")),
        "selected PID {pid} drawn in its card:\n{screen}"
    );
}

#[test]
fn help_keys_page_at_40x12_has_no_fragments_and_scrolls() {
    let mut app = app_from(GROW, Some(35_000));
    key(&mut app, KeyCode::F(1));
    let top = render(&app, 40, 12, &theme(false));
    assert!(top.contains("more lines"), "{top}");
    insta::assert_snapshot!("help_keys_40x12", top);
    for _ in 0..60 {
        key(&mut app, KeyCode::PageDown);
    }
    let end = render(&app, 40, 12, &theme(false));
    assert!(
        end.contains("loop at the end"),
        "the last key is reachable:\n{end}"
    );
    assert!(!end.contains("more lines"), "{end}");
}

/// At the end of a run the alerts have ended with their processes: each card keeps the
/// mark of its worst past alert until `A`, and Enter on a past alert opens the process
/// that died, never another one.
#[test]
fn past_alerts_mark_their_card_until_acknowledged_and_enter_reaches_their_dead_process() {
    let mut app = app_from(LEAK, None);
    app.sync();
    let past: Vec<_> = app.pipe.alerts.history().cloned().collect();
    let oom = past
        .iter()
        .find(|a| a.pid.is_some() && a.severity == gpumon::model::alerts::Severity::Critical)
        .expect("an OOM among the past alerts")
        .clone();
    let pid = oom.pid.expect("about a process");
    let exit = app.pipe.state.procs[&pid].exit.expect("it died");
    assert_eq!(exit.cause.label(), "OOM");
    let border = |app: &App| {
        let screen = render(app, 120, 40, &theme(false));
        screen
            .lines()
            .find(|l| l.contains(&format!("GPU {} ·", oom.gpu)))
            .expect("its card")
            .to_string()
    };
    assert!(border(&app).contains("past (‼"), "{}", border(&app));
    // The panel, on that alert; Enter opens its GPU with the dead process selected.
    key(&mut app, KeyCode::Char('a'));
    for _ in 0..past.len() + 4 {
        if app
            .sel_alert
            .is_some_and(|a| a.key == oom.key() && a.raised_at == oom.raised_at)
        {
            break;
        }
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Detail);
    assert_eq!(app.sel_pid, Some(pid));
    assert_eq!(app.view_state().gpus[app.gpu].info.index, oom.gpu);
    assert!(app.flash.is_none(), "{:?}", app.flash);
    // A process no longer kept is said so, not swapped for its neighbour.
    key(&mut app, KeyCode::Char('a'));
    let sel = app.sel_alert;
    app.pipe.state.procs.remove(&pid);
    app.sel_alert = sel;
    for _ in 0..past.len() + 4 {
        if app.sel_alert.is_some_and(|a| a.key == oom.key()) {
            break;
        }
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Alerts);
    let flash = app.flash.clone().unwrap_or_default();
    assert!(
        flash.contains(&format!("PID {pid} is not listed")),
        "{flash}"
    );
    // A acknowledges past alerts too: the card forgets them, the panel keeps them.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('A'));
    key(&mut app, KeyCode::Char('y'));
    assert!(!border(&app).contains("past"), "{}", border(&app));
    assert_eq!(app.pipe.alerts.history().count(), past.len());
}

/// A process that ended stays listed, but is never signalled: its PID may be another
/// process's by now.
#[test]
fn kill_refuses_a_process_that_has_ended() {
    let mut app = app_from(GROW, None);
    app.source = SourceKind::Live { interval_ms: 1000 };
    app.may_signal = |_| Ok(live("python3 grow_shrink.py"));
    app.sync();
    let dead = app
        .pipe
        .state
        .procs
        .values()
        .find_map(|p| p.exit.map(|_| p.info.pid))
        .expect("462 and 510 end before the recording does");
    select(&mut app, dead);
    key(&mut app, KeyCode::Char('x'));
    assert!(app.prompt.is_none());
    let flash = app.flash.clone().unwrap_or_default();
    assert!(flash.contains(&format!("PID {dead} has ended")), "{flash}");
}

/// Opened before any alert, the panel's selection follows the alert the bar shows (the most
/// severe active one) as alerts come, up to the critical OOM; once a person moves it, it
/// stays where they put it.
#[test]
fn the_panel_follows_the_bars_alert_until_a_person_picks_one() {
    let path = support::fixture(LEAK);
    let all = frames(&path);
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Default::default(),
    );
    app.update(Event::Frame(all[0].clone()));
    key(&mut app, KeyCode::Char('a'));
    let mut critical = false;
    let mut rest = all[1..].iter();
    for f in rest.by_ref() {
        app.update(Event::Frame(f.clone()));
        let top = app.pipe.alerts.visible().first().map(|a| a.key());
        if let Some(top) = top {
            assert_eq!(app.sel_alert.map(|a| a.key), Some(top));
        }
        if app
            .pipe
            .alerts
            .visible()
            .first()
            .is_some_and(|a| a.severity == gpumon::model::alerts::Severity::Critical)
        {
            critical = true;
            break;
        }
    }
    assert!(critical, "the recording raises a critical alert");
    for f in rest.by_ref() {
        if app.alert_ids().len() >= 2 && app.alert_row == 0 {
            break;
        }
        app.update(Event::Frame(f.clone()));
    }
    key(&mut app, KeyCode::Down);
    let chosen = app.sel_alert;
    assert_ne!(
        chosen.map(|a| a.key),
        app.pipe.alerts.visible().first().map(|a| a.key())
    );
    for f in rest.take(200) {
        app.update(Event::Frame(f.clone()));
    }
    let ids = app.alert_ids();
    assert!(
        chosen.is_some_and(|c| ids.contains(&c)),
        "still listed (past)"
    );
    assert_eq!(app.sel_alert, chosen, "kept where the person put it");
}

/// At the end of a clean run the empty panel says the rules ran and found nothing; at its
/// start, that it is too early to tell (it once said "Nothing yet" at the end of 40 epochs).
/// PID 782 of the clean corpus alone (`--pid 782`), as a person filtering to their job sees it.
#[test]
fn the_empty_panel_says_whether_the_rules_have_had_their_epochs() {
    let clean = |until_ms: Option<i64>| {
        let path = support::fixture("../corpus/corpus_clean.jsonl");
        let all = frames(&path);
        let start = all.first().map(|f| f.time()).unwrap_or(0);
        let mut pipe = gpumon::pipeline::Pipeline::default();
        pipe.filter =
            gpumon::pipeline::filter::Filter::new(&[], &[], &[782], |_| None).expect("filter");
        let mut app = App::new(
            SourceKind::Replay {
                file: path.display().to_string(),
                demo: false,
            },
            pipe,
        );
        for f in all
            .iter()
            .filter(|f| until_ms.is_none_or(|u| f.time() <= start + u))
        {
            app.apply(f);
        }
        key(&mut app, KeyCode::Char('a'));
        app
    };
    let end = clean(None);
    assert_eq!(end.pipe.alerts.listed().len(), 0, "PID 782 runs clean");
    let text = render(&end, 100, 12, &theme(false));
    assert!(text.contains("No alerts: the growth"), "{text}");
    assert!(!text.contains("Nothing yet"), "{text}");

    let early = clean(Some(3_000));
    let text = render(&early, 100, 12, &theme(false));
    assert!(text.contains("Nothing yet"), "{text}");
}
