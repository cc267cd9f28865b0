//! What a person reads on every screen: no value cut from its unit or in its middle (in
//! every snapshot and a real terminal), every abbreviation defined by the legend, and the
//! companion-only live mode (no driver) showing the companion's data in the detail view.

use crate::support::{self, app_from, render, theme};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use gpumon::tui::app::{App, View};
use gpumon::tui::event::Event;
use gpumon::tui::ui::legend::LEGEND;

const SIZES: [(u16, u16); 4] = [(40, 12), (80, 24), (120, 40), (200, 60)];

fn key(app: &mut App, c: KeyCode) {
    app.update(Event::from(KeyEvent::new(c, KeyModifiers::NONE)));
}

/// Characters that end a piece of text on screen: a border, or the pane's edge.
fn is_edge(c: char) -> bool {
    matches!(c, '│' | '╮' | '╯' | '┃' | '|')
}

fn is_number(w: &str) -> bool {
    let w = w.trim_start_matches(['+', '-', '≈', '~', '(']);
    !w.is_empty()
        && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        && w.starts_with(|c: char| c.is_ascii_digit())
}

/// Words that name a byte count: a number after one of them without its unit was cut.
const BYTE_LABELS: [&str; 13] = [
    "L", "T", "D", "R", "stranded", "peak", "used", "alloc", "cached", "resv", "asked", "limit",
    "of",
];

/// The values cut where a piece of text meets an edge (a border, the end of a full line, or
/// a `…` that marks a cut), as `line: token`.
fn cut_values(screen: &str) -> Vec<String> {
    let mut out = Vec::new();
    let full = screen.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    for line in screen.lines() {
        let chars: Vec<char> = line.chars().collect();
        // Ends of text: before an edge, before a `…`, and at the end of a full line.
        let mut ends: Vec<(usize, bool)> = Vec::new();
        for (i, &c) in chars.iter().enumerate() {
            if is_edge(c) && i > 0 {
                ends.push((i, false));
            }
            // A `…` inside a word is a command shortened in its middle, on purpose.
            let after = chars.get(i + 1).copied();
            if c == '…' && i > 0 && after.is_none_or(|a| a.is_whitespace() || is_edge(a)) {
                ends.push((i, true));
            }
        }
        if chars.len() == full && chars.last().is_some_and(|c| !c.is_whitespace()) {
            ends.push((chars.len(), false));
        }
        for (end, dots) in ends {
            if chars[end - 1].is_whitespace() {
                continue;
            }
            let text: String = chars[..end].iter().collect();
            let mut words = text.rsplit(|c: char| c.is_whitespace() || is_edge(c));
            let last = words.next().unwrap_or("");
            let before = words.next().unwrap_or("");
            let unit_prefix = ["G", "Gi", "M", "Mi", "K", "Ki", "T", "Ti"].contains(&last);
            let cut = (last.ends_with('.') && is_number(last))
                || (dots && is_number(last))
                || (unit_prefix && is_number(before))
                || (is_number(last) && BYTE_LABELS.contains(&before) && !dots && {
                    // At an edge: a byte count shown without its unit.
                    !last.contains('%')
                });
            if cut {
                out.push(format!(
                    "{line:?}: {before} {last}{}",
                    if dots { "…" } else { "" }
                ));
            }
        }
    }
    out
}

#[test]
fn the_cut_detector_finds_the_cuts_of_issue_24() {
    for bad in [
        "│F 0.998 stranded 3.65 Gi│",
        "│F 0.99 L 56.│",
        "│OOM x1 asked 256 MiB (T 1.2 GiB L 63…│",
        "│peak used 2.70 GiB alloc 1.95│",
    ] {
        assert!(!cut_values(bad).is_empty(), "{bad}");
    }
    for good in [
        "│F 0.998 stranded 3.65 GiB│",
        "│F 0.988 stranded 1.64 GiB  L 20.0 MiB…           │",
        "│util   0% 39°C 121 W│",
        "│grow_shrink.py…2 24  cuda:0│",
    ] {
        assert!(
            cut_values(good).is_empty(),
            "{good}: {:?}",
            cut_values(good)
        );
    }
}

#[test]
fn no_snapshot_cuts_a_value() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let mut bad = Vec::new();
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("snapshots") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "snap") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        // The screen is what follows insta's header.
        let screen = text.splitn(3, "---\n").nth(2).unwrap_or("");
        n += 1;
        for c in cut_values(screen) {
            bad.push(format!(
                "{}: {c}",
                path.file_name().unwrap_or_default().display()
            ));
        }
    }
    assert!(n >= 40, "only {n} snapshots read");
    assert!(bad.is_empty(), "values cut:\n{}", bad.join("\n"));
}

/// Screens of the bundled recordings in every view and selection, at every size.
fn screens() -> Vec<String> {
    let mut out = Vec::new();
    for (fixture, until) in [
        ("h200_torch_grow_shrink.jsonl", Some(35_000)),
        ("h200x2_cvd.jsonl", Some(20_000)),
        ("h200_torch_companion.jsonl", Some(20_000)),
        ("../corpus/corpus_frag.jsonl", Some(65_000)),
        ("../corpus/corpus_leak.jsonl", Some(120_000)),
    ] {
        let mut app = app_from(fixture, until);
        app.sync();
        for gpu in 0..app.pipe.state.gpus.len() {
            app.gpu = gpu;
            for view in [View::Overview, View::Detail] {
                app.view = view;
                app.sel_pid = None;
                app.proc_row = 0;
                app.sync();
                for _ in 0..app.pids().len().min(4) {
                    for (w, h) in SIZES {
                        out.push(render(&app, w, h, &theme(false)));
                    }
                    key(&mut app, KeyCode::Down);
                }
            }
        }
        app.view = View::Alerts;
        for _ in 0..3 {
            for (w, h) in SIZES {
                out.push(render(&app, w, h, &theme(false)));
            }
            key(&mut app, KeyCode::Down);
        }
    }
    out
}

/// Plain words the screens use that are not abbreviations.
const PLAIN: &[&str] = &[
    "a",
    "all",
    "and",
    "at",
    "by",
    "for",
    "in",
    "is",
    "it",
    "no",
    "not",
    "of",
    "on",
    "or",
    "the",
    "to",
    "up",
    "yet",
    "its",
    "now",
    "ago",
    "any",
    "see",
    "via",
    "per",
    "run",
    "key",
    "keys",
    "help",
    "quit",
    "more",
    "past",
    "seen",
    "since",
    "card",
    "used",
    "peak",
    "epoch",
    "epochs",
    "zoom",
    "scale",
    "chart",
    "speed",
    "pause",
    "seek",
    "marks",
    "sort",
    "filter",
    "kill",
    "freeze",
    "detail",
    "alerts",
    "alert",
    "back",
    "go",
    "ack",
    "Enter",
    "Esc",
    "Tab",
    "space",
    "frag",
    "floor",
    "slope",
    "gates",
    "asked",
    "limit",
    "other",
    "free",
    "cache",
    "held",
    "leak",
    "grows",
    "grab",
    "util",
    "root",
    "user",
    "vm",
    "gpumon",
    "driver",
    "above",
    "below",
    "raised",
    "cleared",
    "warning",
    "critical",
    "info",
    "unset",
    "launch",
    "this",
    "is",
    "n",
    "p",
    "PID",
    "USER",
    "COMMAND",
    "CUDA",
    "USED",
    "PEAK",
    "GROWTH",
    "GPU",
    "OOM",
    "NVML",
    "LIVE",
    "H200",
    "H100",
    "GiB",
    "MiB",
    "KiB",
    "B",
    "W",
    "ep",
    "ceil",
    "lines",
    "PgDn",
    "PgUp",
    "min",
    "s",
    "m",
    "h",
    "x",
    "exited",
    "killed",
    "gone",
    "requests",
    "hole",
    "holes",
    "fits",
    "fit",
    "largest",
    "noise",
    "growth",
    "sustained",
    "spread",
    "median",
    "margin",
    "headroom",
    "typical",
    "requested",
    "reserved",
    "allocated",
    "interposer",
    "series",
    "torch",
    "jax",
    "PyTorch",
    "JAX",
    "XLA",
    "TF",
    "ring",
    "rank",
    "NVIDIA",
    "HBM3",
    "but",
    "had",
    "was",
    "own",
    "ran",
    "six",
    "so",
    "get",
    "can",
    "has",
    "CMD",
    "Sen",
    "off",
    "new",
    "one",
    "two",
    "out",
    "set",
    "use",
    "why",
    "how",
    "who",
    // The allocator's own name (TensorFlow's and JAX's best-fit-with-coalescing allocator).
    "BFC",
];

/// The words of a screen that look like abbreviations (short, capitalised or clipped) and
/// that neither the legend, the key table nor the plain words define.
fn undefined(screen: &str, defined: &std::collections::BTreeSet<String>) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for line in screen.lines() {
        // Process rows and the facts beside them quote command lines and paths: the
        // program's words, not gpumon's.
        if line.contains(".py")
            || line.contains("python")
            || line.contains('/')
            || line.contains("import ")
            || line.contains("cuda:")
            || line.contains(';')
            || line.contains(']')
            || line.contains('[')
            || line.contains('=')
        {
            continue;
        }
        for w in line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '\'')) {
            let w = w.trim_matches('-');
            if w.is_empty()
                || w.contains('\'')
                || w.chars()
                    .any(|c| c.is_ascii_digit() || c == '_' || c == '-')
                || !w.chars().all(|c| c.is_ascii_alphabetic())
            {
                continue;
            }
            // Without colour a chart draws its series with their legend letters
            // (`r resv`, `a alloc`, `p peak/ep`, `f floor/ep`): runs of them are lines.
            if w.len() >= 2 && w.chars().all(|c| "rapf".contains(c)) {
                continue;
            }
            // Long lower-case words are English; short or capitalised ones may be
            // abbreviations.
            let abbrev = w.len() <= 3 || w.chars().filter(|c| c.is_ascii_uppercase()).count() >= 2;
            // A plural of a defined word (`OOMs`) is defined.
            let known = |w: &str| defined.contains(w) || defined.contains(&w.to_lowercase());
            if abbrev && !known(w) && !w.strip_suffix('s').is_some_and(known) {
                out.insert(w.to_string());
            }
        }
    }
    out.into_iter().collect()
}

fn defined() -> std::collections::BTreeSet<String> {
    let mut d: std::collections::BTreeSet<String> = PLAIN.iter().map(|s| s.to_string()).collect();
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    for t in LEGEND {
        d.extend(words(t.sym));
        // A meaning that names an abbreviation (`L: largest hole`, `/win: per window`)
        // defines it too.
        d.extend(words(t.meaning).into_iter().filter(|w| w.len() <= 2));
        d.extend(
            t.meaning
                .split_whitespace()
                .filter_map(|w| w.strip_prefix('/'))
                .flat_map(words),
        );
    }
    for b in gpumon::tui::keys::BINDINGS {
        d.extend(words(b.label));
        d.extend(words(b.desc));
    }
    d
}

#[test]
fn every_abbreviation_on_screen_is_in_the_legend() {
    let defined = defined();
    let mut bad = std::collections::BTreeMap::<String, String>::new();
    for s in screens() {
        for w in undefined(&s, &defined) {
            bad.entry(w).or_insert_with(|| s.clone());
        }
    }
    let list: Vec<&String> = bad.keys().collect();
    let first = bad.values().next().cloned().unwrap_or_default();
    assert!(
        bad.is_empty(),
        "undefined on screen: {list:?}\nfirst seen on:\n{first}"
    );
    // The scan can fail: a new abbreviation planted on a real screen is caught.
    let planted = render(
        &app_from("h200_torch_grow_shrink.jsonl", Some(35_000)),
        80,
        24,
        &theme(false),
    )
    .replacen(" no alerts", " no NVM alerts", 1);
    assert_eq!(
        undefined(&planted, &defined),
        vec!["NVM".to_string()],
        "{planted}"
    );
}

#[test]
fn without_nvml_the_detail_view_shows_the_companion() {
    use gpumon::model::frame::Frame;
    // The companion fixture without its NVML side: what gpumon sees with no driver and a
    // companion running.
    let path = support::fixture("h200_torch_companion.jsonl");
    let frames = support::frames(&path);
    let t0 = frames[0].time();
    let mut app = App::new(
        gpumon::tui::app::SourceKind::Live { interval_ms: 1000 },
        Default::default(),
    );
    app.apply(&support::bare_header(t0, vec![]));
    // While it runs: up to its goodbye.
    let bye = frames
        .iter()
        .find(|f| {
            matches!(f, Frame::Companion(c)
                if matches!(c.msg, gpumon::wire::Message::Disconnected(_)))
        })
        .map_or(i64::MAX, Frame::time);
    let mut n = 0;
    for f in frames.iter().filter(|f| f.time() < bye.min(t0 + 20_000)) {
        if let Frame::Companion(_) = f {
            app.apply(f);
            n += 1;
        }
    }
    assert!(n > 10, "{n} companion frames");
    app.sync();
    assert!(app.pipe.state.gpus.is_empty());
    let overview = render(&app, 80, 24, &theme(false));
    assert!(
        overview.contains("allocator state reported by companions"),
        "{overview}"
    );
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Detail);
    for (w, h) in SIZES {
        let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, w, h));
        let (clashes, blank) = gpumon::tui::ui::draw_checked(&mut buf, &app, &theme(false));
        let screen = render(&app, w, h, &theme(false));
        assert!(clashes.is_empty(), "{w}x{h}: {clashes:?}\n{screen}");
        assert!(
            blank <= 0.35,
            "{w}x{h}: {:.0}% empty\n{screen}",
            blank * 100.0
        );
        let pid = app.pids()[0];
        assert!(screen.contains(&format!("PID {pid}")), "{w}x{h}\n{screen}");
        if h >= 24 {
            // The chart of its own samples, and its allocator panel.
            assert!(
                screen.contains("GiB┤") || screen.contains("MiB┤"),
                "{w}x{h}\n{screen}"
            );
            assert!(screen.contains("alloc"), "{w}x{h}\n{screen}");
            assert!(
                screen.contains("F 0.") || screen.contains("F n/a"),
                "{w}x{h}\n{screen}"
            );
        }
    }
    insta::assert_snapshot!(
        "companion_only_detail_80x24",
        render(&app, 80, 24, &theme(false))
    );
}

#[test]
fn the_alerts_panel_never_overprints_while_scrolled() {
    // Every alert of the leak run selected, its message scrolled from the top to past its
    // end, at the sizes where the message does not fit: no piece is drawn over another,
    // and the counts of hidden lines are on rows of their own.
    let mut app = app_from("../corpus/corpus_leak.jsonl", Some(120_000));
    app.view = View::Alerts;
    app.sync();
    let n = app.alert_ids().len();
    assert!(n >= 3, "{n} alerts");
    for (w, h) in [(40, 12), (60, 15), (80, 24)] {
        app.alert_row = 0;
        for _ in 0..n {
            let mut seen_above = false;
            for scroll in 0..30u16 {
                app.alert_scroll = scroll;
                let mut buf =
                    ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, w, h));
                let (clashes, _) = gpumon::tui::ui::draw_checked(&mut buf, &app, &theme(false));
                let screen = render(&app, w, h, &theme(false));
                assert!(
                    clashes.is_empty(),
                    "{w}x{h} scroll {scroll}: {clashes:?}\n{screen}"
                );
                seen_above |= screen.contains("lines above: PgUp");
                assert!(!screen.contains("PgUp: back"), "{screen}");
            }
            assert!(seen_above || h >= 24, "{w}x{h}: never scrolled");
            key(&mut app, KeyCode::Down);
        }
    }
}

#[test]
fn no_value_is_cut_in_a_real_terminal() {
    use crate::tmux_e2e::{have_tmux, keys, pane, start_cmd, wait_for};
    if !have_tmux() {
        return;
    }
    // The bundled demo in tmux at 80x24: overview, detail of each of the first processes,
    // and the alerts panel, read as the terminal shows them.
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz");
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {}; sleep 60",
        bin.display(),
        demo.display()
    );
    let s = start_cmd("cuts", 80, 24, &cmd);
    let first = wait_for(&s, "REPLAY", 10);
    assert!(first.contains("REPLAY"), "{first}");
    keys(&s, &["]", "]", "]", "]", "]", "]"]);
    let mut screens = vec![pane(&s)];
    keys(&s, &["Enter"]);
    for _ in 0..3 {
        screens.push(pane(&s));
        keys(&s, &["j"]);
    }
    keys(&s, &["Escape", "a"]);
    screens.push(pane(&s));
    for screen in &screens {
        let cut = cut_values(screen);
        assert!(cut.is_empty(), "values cut: {cut:?}\n{screen}");
    }
    assert!(
        screens.iter().any(|p| p.contains("Alerts ")),
        "{screens:#?}"
    );
}

#[test]
fn rows_scrolled_out_of_the_process_table_are_counted_above_and_below() {
    let mut app = app_from("../corpus/corpus_leak.jsonl", Some(110_000));
    app.gpu = 1;
    app.view = View::Detail;
    app.sync();
    let n = app.pids().len();
    assert!(n >= 8, "{n} processes");
    let count = |screen: &str, what: &str| -> usize {
        screen
            .lines()
            .find_map(|l| {
                let at = l.find(what)?;
                let num = l[..at].rsplit('+').next()?;
                num.trim().parse().ok()
            })
            .unwrap_or(0)
    };
    // Down past the rows that fit (5 at 80x24), not to the end.
    for _ in 0..6 {
        key(&mut app, KeyCode::Down);
    }
    let screen = render(&app, 80, 24, &theme(false));
    let (above, below) = (count(&screen, " above"), count(&screen, " below"));
    let rows = screen
        .lines()
        .filter(|l| l.contains("root") && l.contains("cuda:"))
        .count();
    assert!(above > 0 && below > 0, "{screen}");
    assert_eq!(above + rows + below, n, "{screen}");
}
