//! `p` freezes one moment of a live view: the model and its alerts together. An alert
//! raised after the freeze stays off the frozen screen (bar, panel, row marks) until the
//! view is thawed, while the engine runs on behind it.

use crate::support::{fixture, frames, render, theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use gpumon::pipeline::Pipeline;
use gpumon::tui::app::{App, SourceKind};
use gpumon::tui::event::Event;

fn press(app: &mut App, c: char) {
    app.update(Event::from(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::NONE,
    )));
}

#[test]
fn a_frozen_view_shows_the_alerts_of_its_moment() {
    let all = frames(&fixture("../corpus/corpus_leak.jsonl"));
    let mut app = App::new(SourceKind::Live { interval_ms: 1000 }, Pipeline::default());
    let quiet = all.len() / 20;
    for f in &all[..quiet] {
        app.apply(f);
    }
    assert!(app.pipe.alerts.listed().is_empty(), "no alert yet");
    press(&mut app, 'p');
    let before = render(&app, 80, 24, &theme(false));
    let before_wide = render(&app, 120, 40, &theme(false));
    for f in &all[quiet..] {
        app.apply(f);
    }
    assert!(!app.pipe.alerts.listed().is_empty(), "the leak is found");
    assert!(
        app.view_alerts().listed().is_empty(),
        "the frozen view does not see it"
    );
    assert!(app.headline_alert().is_none());
    assert_eq!(
        render(&app, 80, 24, &theme(false)),
        before,
        "the frozen screen"
    );
    // The card's mark and the rows' risk colours too, where the wide layout shows them.
    assert_eq!(
        render(&app, 120, 40, &theme(false)),
        before_wide,
        "the frozen screen at 120x40"
    );
    press(&mut app, 'p');
    assert!(
        !app.view_alerts().listed().is_empty(),
        "thawed: the leak shows"
    );
    assert!(app.headline_alert().is_some());
}

#[test]
fn a_frozen_screen_marks_no_card_with_an_alert_raised_after_it() {
    let all = frames(&fixture("../corpus/corpus_leak.jsonl"));
    let mut probe = App::new(SourceKind::Live { interval_ms: 1000 }, Pipeline::default());
    let raised = all
        .iter()
        .position(|f| {
            probe.apply(f);
            !probe.pipe.alerts.active().is_empty()
        })
        .expect("the leak is raised");
    let mut app = App::new(SourceKind::Live { interval_ms: 1000 }, Pipeline::default());
    for f in &all[..raised] {
        app.apply(f);
    }
    press(&mut app, 'p');
    let before = render(&app, 120, 40, &theme(false));
    app.apply(&all[raised]);
    assert!(
        !app.pipe.alerts.active().is_empty(),
        "active behind the freeze"
    );
    assert_eq!(
        render(&app, 120, 40, &theme(false)),
        before,
        "the frozen card border and rows"
    );
    press(&mut app, 'p');
    assert_ne!(
        render(&app, 120, 40, &theme(false)),
        before,
        "thawed: it shows"
    );
}
