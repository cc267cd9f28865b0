//! The legend cannot drift from the screens: every entry of `legend::LEGEND` must appear
//! on at least one screen drawn from the bundled recordings (an entry for something no
//! screen draws any more fails here). tests/it/interact.rs checks that help's legend page
//! lists every entry.

use crate::support::{self, app_from, render, theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use gpumon::tui::app::{App, SourceKind, View};
use gpumon::tui::event::Event;
use gpumon::tui::ui::legend::{self, LEGEND, Term};

fn key(app: &mut App, c: KeyCode) {
    app.update(Event::from(KeyEvent::new(c, KeyModifiers::NONE)));
}

/// The two-GPU recording made odd in the ways the bundled runs never were: the second
/// card is another model (so integer CUDA_VISIBLE_DEVICES are uncertain), one process
/// lists only the other card (hidden), GPU 0 fails to read for 10 s (a gap), and one
/// process's usage is unreported (n/a).
fn odd_app() -> App {
    use gpumon::model::frame::Frame;
    let path = support::fixture("h200x2_cvd.jsonl");
    let mut frames = support::frames(&path);
    let t0 = frames[0].time();
    let mut first_pid = None;
    for f in &mut frames {
        match f {
            Frame::Header(h) => h.gpus[1].name = "NVIDIA H100 80GB HBM3".into(),
            Frame::Procs { procs, .. } => {
                for p in procs.iter_mut() {
                    let pid = *first_pid.get_or_insert(p.pid);
                    if p.pid == pid {
                        p.cuda_visible_devices = Some("7".into());
                    }
                }
            }
            Frame::Tick(t) if t.t > t0 + 8_000 && t.t < t0 + 18_000 => {
                t.gpus[0].error = Some("GPU is lost".into());
                t.gpus[0].mem = None;
            }
            Frame::Tick(t) if t.t >= t0 + 18_000 => {
                if let Some(p) = t.gpus[1].procs.first_mut() {
                    p.used = None;
                }
            }
            _ => {}
        }
    }
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Default::default(),
    );
    for f in frames.iter().filter(|f| f.time() <= t0 + 20_000) {
        app.apply(f);
    }
    app
}

/// Screens of the bundled recordings in every view, as text.
fn screens() -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |app: &App| {
        for (w, h) in [(80, 24), (120, 40)] {
            out.push(render(app, w, h, &theme(false)));
        }
    };
    for (fixture, until) in [
        ("h200_torch_grow_shrink.jsonl", Some(35_000)),
        ("h200_torch_grow_shrink.jsonl", None),
        ("h200x2_cvd.jsonl", Some(20_000)),
        ("h200_torch_companion.jsonl", Some(20_000)),
        ("h200_jax_companion.jsonl", None),
        ("../corpus/corpus_frag.jsonl", Some(65_000)),
        ("../corpus/corpus_leak.jsonl", Some(70_000)),
        ("../corpus/corpus_leak.jsonl", Some(120_000)),
        ("../corpus/corpus_frag.jsonl", None),
        ("odd", None),
    ] {
        let mut app = if fixture == "odd" {
            odd_app()
        } else {
            app_from(fixture, until)
        };
        app.sync();
        for gpu in 0..app.pipe.state.gpus.len() {
            app.gpu = gpu;
            for view in [View::Overview, View::Detail] {
                app.view = view;
                app.sel_pid = None;
                app.proc_row = 0;
                app.sync();
                let n = app.pids().len();
                // Every process selected once, so each allocator panel is drawn.
                for _ in 0..n {
                    add(&app);
                    key(&mut app, KeyCode::Down);
                }
            }
        }
        // Sorted by growth, the last column is the growth rate.
        app.view = View::Overview;
        key(&mut app, KeyCode::Char('s'));
        key(&mut app, KeyCode::Char('s'));
        add(&app);
        app.view = View::Alerts;
        for _ in 0..6 {
            add(&app);
            key(&mut app, KeyCode::Down);
        }
        key(&mut app, KeyCode::Char('A'));
        add(&app);
        app.source = SourceKind::Live { interval_ms: 1000 };
        app.recording = Some("x.jsonl".into());
        key(&mut app, KeyCode::Char('p'));
        add(&app);
    }
    // The optional columns (`o`), on a recording with their data: the widest of them need
    // a wide table.
    let mut app = app_from("peer_columns.jsonl", None);
    key(&mut app, KeyCode::Char('o'));
    out.push(render(&app, 200, 60, &theme(false)));
    out
}

/// Whether a screen shows `t` (a few entries are patterns rather than literal text).
fn shows(t: &Term, screen: &str) -> bool {
    let lines = || screen.lines();
    match *t {
        legend::LIMIT => lines().any(|l| l.contains(" L ") && l.contains(" of T ")),
        legend::EPOCH => lines().any(|l| {
            l.as_bytes()
                .windows(2)
                .any(|w| !w[0].is_ascii_alphanumeric() && w[1] == b'e')
                && l.split(|c: char| !c.is_alphanumeric()).any(|w| {
                    w.len() >= 2 && w.starts_with('e') && w[1..].bytes().all(|c| c.is_ascii_digit())
                })
        }),
        legend::PER_EPOCH => screen.contains("M/ep"),
        legend::TICK => screen.contains("╹e"),
        legend::REFS => {
            lines().any(|l| l.contains("peak ") && l.contains("card ") && l.contains("f: scale"))
        }
        // Without colour (these screens) each series has its letter.
        legend::TRACES => screen.contains("r resv") && screen.contains("a alloc"),
        legend::CHART_KEY => screen.contains("c: card") || screen.contains("c: chart the process"),
        legend::CARD_MARK => lines().any(|l| {
            (l.starts_with('╭') || l.starts_with('┌'))
                && ["‼ ", "⚠ ", "ℹ "].iter().any(|m| l.contains(m))
        }),
        legend::GATES => screen.contains("gates ✓"),
        legend::EVIDENCE => {
            let words = |w: &str| lines().any(|l| l.split(' ').any(|x| x == w));
            ["T", "L", "D", "R"].iter().all(|w| words(w))
        }
        legend::EV_WORDS => ["card ", "allocator ", "other "]
            .iter()
            .all(|w| screen.contains(w)),
        legend::BAR => screen.contains("█") && screen.contains("▓") && screen.contains("▒"),
        legend::MORE => lines().any(|l| l.contains(" more") && l.contains('+')),
        legend::SCROLLED => screen.contains(" above") || screen.contains(" below"),
        legend::SEV => ["‼", "⚠", "ℹ"].iter().any(|s| screen.contains(s)),
        legend::MARK => lines().any(|l| {
            let row = l.trim_start_matches('│');
            (row.starts_with('⚠') || row.starts_with('‼') || row.starts_with('ℹ'))
                && row.contains("python")
        }),
        legend::PAST => lines().any(|l| l.starts_with("✓ ")),
        legend::EXITED => ["   exited ", "   OOM ", "   killed "]
            .iter()
            .any(|w| screen.contains(w)),
        legend::PAST_MARK => lines().any(|l| {
            (l.starts_with('╭') || l.starts_with('┌'))
                && [" past (‼ ", " past (⚠ ", " past (ℹ "]
                    .iter()
                    .any(|m| l.contains(m))
        }),
        legend::SORT => screen.contains('▼') || screen.contains('▲'),
        legend::CUDA => screen.contains("cuda:1"),
        legend::CUDA_Q => screen.contains("cuda:0?") || screen.contains("cuda:1?"),
        legend::FRAG => screen.contains("F 0.") || screen.contains("F 1.0"),
        legend::PEAK => screen.contains(" PEAK"),
        legend::PER_MIN => screen.contains("B/m"),
        legend::PID_AT => lines().any(|l| {
            l.split(' ').any(|w| {
                w.split_once('@').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && a.bytes().all(|c| c.is_ascii_digit())
                        && b.bytes().next().is_some_and(|c| c.is_ascii_digit())
                })
            })
        }),
        legend::USED => screen.contains("used "),
        _ => screen.contains(t.sym),
    }
}

#[test]
fn every_legend_entry_appears_on_a_screen() {
    let screens = screens();
    let missing: Vec<&str> = LEGEND
        .iter()
        .filter(|t| !screens.iter().any(|s| shows(t, s)))
        .map(|t| t.sym)
        .collect();
    assert!(
        missing.is_empty(),
        "legend entries no screen draws: {missing:?}"
    );
}
