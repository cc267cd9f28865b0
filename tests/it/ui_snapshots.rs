//! Whole-screen snapshots of real H200 recordings at the sizes people use:
//! a full terminal (80x24) and a small tmux pane (40x12), Unicode and ASCII.

use crate::support::{app_from, render, theme, with_view};
use gpumon::tui::app::View;

const GROW: &str = "h200_torch_grow_shrink.jsonl";

#[test]
fn overview_80x24_while_three_processes_share_the_card() {
    let app = app_from(GROW, Some(35_000));
    insta::assert_snapshot!(render(&app, 80, 24, &theme(false)));
}

#[test]
fn overview_40x12_small_pane() {
    let app = app_from(GROW, Some(35_000));
    insta::assert_snapshot!(render(&app, 40, 12, &theme(false)));
}

#[test]
fn detail_80x24_whole_run() {
    let app = with_view(app_from(GROW, None), View::Detail);
    insta::assert_snapshot!(render(&app, 80, 24, &theme(false)));
}

#[test]
fn detail_40x12_ascii() {
    let app = with_view(app_from(GROW, Some(35_000)), View::Detail);
    let screen = render(&app, 40, 12, &theme(true));
    assert!(screen.is_ascii(), "ASCII mode drew non-ASCII:\n{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn idle_card_overview_ascii_80x24() {
    let app = app_from("h200_idle.jsonl", None);
    let screen = render(&app, 80, 24, &theme(true));
    assert!(screen.is_ascii());
    insta::assert_snapshot!(screen);
}

#[test]
fn help_is_generated_from_key_table() {
    let mut app = app_from(GROW, Some(10_000));
    app.help = true;
    let screen = render(&app, 80, 24, &theme(false));
    for b in gpumon::tui::keys::listed().take(15) {
        assert!(screen.contains(b.desc), "help lacks {:?}", b.desc);
    }
    insta::assert_snapshot!(screen);
}

#[test]
fn every_view_survives_tiny_and_odd_sizes() {
    // Single GPU, two GPUs, and a companion run (allocator panel below or beside the table).
    for (fixture, until) in [
        (GROW, None),
        ("h200x2_cvd.jsonl", Some(20_000)),
        ("h200_torch_companion.jsonl", Some(1_500)),
    ] {
        for view in [View::Overview, View::Detail, View::Alerts] {
            let mut app = with_view(app_from(fixture, until), view);
            app.proc_row = 1;
            app.sel_pid = None;
            app.sync();
            let mut sizes = vec![(1, 1), (19, 4), (200, 60), (130, 16), (110, 20)];
            for w in [20, 33, 40, 41, 60, 80, 120] {
                for h in 5..=16 {
                    sizes.push((w, h));
                }
            }
            for (w, h) in sizes {
                let _ = render(&app, w, h, &theme(false));
                let _ = render(&app, w, h, &theme(true));
            }
        }
    }
}

#[test]
fn allocator_detail_of_the_fragmenting_run_120x36() {
    // 65 s into the corpus run: frag_oom's cache has shattered, the risk alert is up.
    let mut app = with_view(
        app_from("../corpus/corpus_frag.jsonl", Some(65_000)),
        View::Detail,
    );
    app.gpu = 1;
    let frag = app
        .rows_on(1)
        .iter()
        .find(|(p, _)| {
            p.info
                .cmdline
                .as_deref()
                .is_some_and(|c| c.contains("frag_oom"))
        })
        .map(|(p, _)| p.info.pid)
        .expect("frag_oom runs on GPU 1");
    app.sel_pid = Some(frag);
    app.sel_chosen = true;
    app.sync();
    let screen = render(&app, 120, 36, &theme(false));
    assert!(
        screen.contains("F 0.9"),
        "fragmentation index shown:\n{screen}"
    );
    assert!(
        screen.contains("stranded"),
        "stranded bytes shown:\n{screen}"
    );
    insta::assert_snapshot!(screen);
}

#[test]
fn a_selection_past_exited_processes_still_shows_the_table() {
    let mut app = with_view(app_from(GROW, Some(35_000)), View::Detail);
    app.proc_row = 99;
    app.sel_pid = None;
    app.sync();
    let screen = render(&app, 80, 24, &theme(false));
    assert!(
        screen.contains("grow_shrink.py"),
        "process rows vanished:\n{screen}"
    );
}

/// A recording that carries the optional columns' data (`peer_columns.jsonl`: a synthetic
/// recording in the format, see docs/recording-format.md): at each size, the overview as it
/// opens (`auto`: the columns with data where the table is wide) and after `o` (`on`: as
/// many as leave the command room). The values shown are the recorded ones.
#[test]
fn optional_columns_at_the_four_sizes() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    // PID 1201's SM % in the last tick, as recorded.
    let text =
        std::fs::read_to_string(crate::support::fixture("peer_columns.jsonl")).expect("fixture");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a tick")).expect("json");
    let sm = last["gpus"][0]["procs"][0]["sm_util"]
        .as_u64()
        .expect("sm_util");
    let sm = format!(" {sm}% ");
    let procs: serde_json::Value =
        serde_json::from_str(text.lines().nth(1).expect("procs")).expect("json");
    let ran =
        last["t"].as_i64().expect("t") - procs["procs"][0]["started"].as_i64().expect("started");
    let ran = gpumon::tui::ui::proc_column::run_time(ran);
    for (w, h) in [(40u16, 12u16), (80, 24), (120, 40), (200, 60)] {
        for on in [false, true] {
            let mut app = app_from("peer_columns.jsonl", None);
            if on {
                app.update(gpumon::tui::event::Event::from(KeyEvent::new(
                    KeyCode::Char('o'),
                    KeyModifiers::NONE,
                )));
            }
            let screen = render(&app, w, h, &theme(false));
            let wide = w >= 200 || (on && w >= 80);
            assert_eq!(
                screen.contains("SM%") && screen.contains(&sm),
                wide,
                "{w}x{h} on={on}:\n{screen}"
            );
            if w >= 200 && on {
                assert!(screen.contains("trainer-0/pytorch"), "{screen}");
                assert!(
                    screen.contains(&format!(" {ran} ")),
                    "run time {ran}: {screen}"
                );
            }
            let mode = if on { "on" } else { "auto" };
            insta::assert_snapshot!(format!("optional_columns_{w}x{h}_{mode}"), screen);
        }
    }
}
