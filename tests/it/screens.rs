//! The screens a person sees, from real recordings with 1, 2 and 8 GPUs at the sizes
//! people use (a small tmux pane to a large terminal): snapshots to read, and checks that
//! no two pieces write the same cell and that at most a fifth of a screen is empty.

use crate::support::combine;

use crate::support::{app_from, bare_header, theme, with_view};
use gpumon::model::frame::Frame;
use gpumon::model::sample::{GpuInfo, GpuSample, MemInfo, ProcInfo, ProcKind, ProcSample, Tick};
use gpumon::pipeline::Pipeline;
use gpumon::tui::app::{App, SourceKind, View};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

const SIZES: [(u16, u16); 4] = [(40, 12), (80, 24), (120, 40), (200, 60)];

/// Draw with overlap checking; the screen as text and the clashes.
fn checked(app: &App, w: u16, h: u16, ascii: bool) -> (Buffer, f64, String, Vec<String>) {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    let (clashes, empty) = gpumon::tui::ui::draw_checked(&mut buf, app, &theme(ascii));
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(buf[(x, y)].symbol());
        }
        text.push('\n');
    }
    (buf, empty, text, clashes)
}

/// Every size and view of one recording: no overprinting, little empty space, snapshots.
fn check_all(name: &str, app: App) {
    let mut app = app;
    for view in [View::Overview, View::Detail] {
        app = with_view(app, view);
        for (w, h) in SIZES {
            let (_, blank, text, clashes) = checked(&app, w, h, false);
            // GPUMON_SCREENS=DIR: write every screen there to read them side by side.
            if let Some(dir) = std::env::var_os("GPUMON_SCREENS") {
                let f = std::path::Path::new(&dir).join(format!("{name}_{view:?}_{w}x{h}.txt"));
                let note = format!("blank {:.0}% clashes {clashes:?}\n", blank * 100.0);
                std::fs::write(f, note + &text).expect("write screen");
                continue;
            }
            assert!(
                clashes.is_empty(),
                "{name} {view:?} {w}x{h}: pieces overlap: {clashes:?}\n{text}"
            );
            assert!(
                blank <= 0.2,
                "{name} {view:?} {w}x{h}: {:.0}% of the screen is empty\n{text}",
                blank * 100.0
            );
            let snap = format!("{name}_{view:?}_{w}x{h}").to_lowercase();
            insta::assert_snapshot!(snap, text);
        }
    }
}

#[test]
fn one_gpu_three_processes() {
    check_all(
        "1gpu",
        app_from("h200_torch_grow_shrink.jsonl", Some(35_000)),
    );
}

#[test]
fn two_gpus_with_companions_and_a_growth_alert() {
    let mut app = app_from("../corpus/corpus_leak.jsonl", Some(110_000));
    app.gpu = 1;
    check_all("2gpu", app);
}

#[test]
fn eight_gpus_combined_from_real_recordings() {
    let path = combine::eight_gpu_file();
    let mut app = app_from(path.to_str().expect("utf-8 path"), Some(60_000));
    assert_eq!(app.pipe.state.gpus.len(), 8);
    app.gpu = 2;
    check_all("8gpu", app);
}

#[test]
fn ascii_screens_are_ascii_and_do_not_overlap() {
    let app = app_from("../corpus/corpus_leak.jsonl", Some(110_000));
    for view in [View::Overview, View::Detail] {
        let app = with_view(app_from("../corpus/corpus_leak.jsonl", Some(110_000)), view);
        for (w, h) in SIZES {
            let (_, _, text, clashes) = checked(&app, w, h, true);
            assert!(text.is_ascii(), "{view:?} {w}x{h}:\n{text}");
            assert!(clashes.is_empty(), "{view:?} {w}x{h}: {clashes:?}\n{text}");
        }
    }
    drop(app);
}

#[test]
fn the_combined_recording_keeps_each_source_stream() {
    let lines = combine::combine(&combine::EIGHT, 500);
    let header: serde_json::Value = serde_json::from_str(&lines[0]).expect("header");
    let gpus = header["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 8);
    let uuids: std::collections::BTreeSet<_> = gpus
        .iter()
        .map(|g| g["uuid"].as_str().expect("uuid"))
        .collect();
    assert_eq!(uuids.len(), 8, "UUIDs are unique per GPU");
    // GPU 6 is GPU 0 of the grow/shrink run: its peak is that run's peak.
    let combined = app_from(combine::eight_gpu_file().to_str().expect("path"), None);
    let single = app_from("h200_torch_grow_shrink.jsonl", None);
    assert_eq!(
        combined.pipe.state.gpus[6].peak.value,
        single.pipe.state.gpus[0].peak.value
    );
    // Processes keep their GPU: the corpus run's PIDs sit on GPUs 0 and 1 only.
    for (pid, p) in &combined.pipe.state.procs {
        if *pid < 100_000 {
            assert!(
                p.gpus.keys().all(|g| *g < 2),
                "pid {pid} on {:?}",
                p.gpus.keys()
            );
        }
    }
}

/// A 140 GiB card with one process that started 40 s ago and holds 10 GiB.
fn young_process() -> App {
    let gib = 1u64 << 30;
    let total = 140 * gib;
    let start = 1_800_000_000_000i64;
    let mut app = App::new(
        SourceKind::Replay {
            file: "synthetic".into(),
            demo: false,
        },
        Pipeline::default(),
    );
    app.apply(&bare_header(
        start,
        vec![GpuInfo {
            index: 0,
            name: "NVIDIA H200".into(),
            uuid: "GPU-1".into(),
            pci_bus_id: "00000000:00:06.0".into(),
            memory_total: total,
            mig_uuids: vec![],
        }],
    ));
    // Ten minutes of history on the card; the process arrives 40 s before the end,
    // ramps up over 5 s and holds 10 GiB.
    for s in 0..=600i64 {
        let t = start + s * 1000;
        let age = s - 560;
        let used = (age >= 0).then(|| (age.min(5) as u64 * 2 * gib).min(10 * gib));
        let procs = used
            .map(|u| ProcSample {
                pid: 4242,
                kind: ProcKind::Compute,
                used: Some(u),
                ..ProcSample::default()
            })
            .into_iter()
            .collect();
        if age == 0 {
            app.apply(&Frame::Procs {
                t,
                procs: vec![ProcInfo {
                    pid: 4242,
                    cmdline: Some("python3 train.py".into()),
                    ..ProcInfo::default()
                }],
            });
        }
        let u = used.unwrap_or(0) + gib;
        app.apply(&Frame::Tick(Tick {
            t,
            gpus: vec![GpuSample {
                index: 0,
                mem: Some(MemInfo {
                    total,
                    used: u,
                    free: total - u,
                    reserved: 0,
                }),
                util: None,
                temp_c: None,
                power_mw: None,
                procs,
                error: None,
            }],
        }));
    }
    app
}

#[test]
fn a_young_process_fills_the_detail_chart() {
    let app = with_view(young_process(), View::Detail);
    let (buf, _, text, clashes) = checked(&app, 80, 24, false);
    assert!(clashes.is_empty(), "{clashes:?}");
    // The plot: rows between the legend and the time axis, right of the value axis.
    let rows: Vec<u16> = (0..24)
        .filter(|&y| (0..80).any(|x| matches!(buf[(x, y)].symbol(), "│" | "┤")))
        .filter(|&y| (0..80).all(|x| buf[(x, y)].symbol() != "└"))
        .collect();
    let axis_x = (0..80)
        .find(|&x| buf[(x, rows[0])].symbol() == "┤" || buf[(x, rows[0])].symbol() == "│")
        .expect("value axis");
    let (x0, x1) = (axis_x + 1, 79);
    let is_data = |x: u16, y: u16| {
        let s = buf[(x, y)].symbol();
        s.chars()
            .next()
            .is_some_and(|c| ('\u{2801}'..='\u{28ff}').contains(&c))
            && !matches!(s, "⠁" | "⠂" | "⠄" | "⡀" | "⠈" | "⠐" | "⠠" | "⢀") // dotted references
    };
    let cols = (x0..x1)
        .filter(|&x| rows.iter().any(|&y| is_data(x, y)))
        .count();
    let data_rows = rows
        .iter()
        .filter(|&&y| (x0..x1).any(|x| is_data(x, y)))
        .count();
    let width = f64::from(x1 - x0);
    assert!(
        cols as f64 >= 0.5 * width,
        "data spans {cols} of {width} columns\n{text}"
    );
    assert!(
        data_rows * 2 >= rows.len(),
        "data spans {data_rows} of {} rows\n{text}",
        rows.len()
    );
    assert!(
        text.contains("pid 4242"),
        "the chart is the process's:\n{text}"
    );
}

#[test]
fn overprinting_and_empty_screens_are_caught() {
    // The checks above can fail: a screen drawn by pieces that overlap, and one that
    // is mostly empty, are both reported.
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 12));
    let mut p = gpumon::tui::ui::paint::Painter::checked(&mut buf);
    p.paint("process row", |b| {
        b.set_string(
            0,
            3,
            "  461 root  python3 train.py  24.6 GiB",
            ratatui::style::Style::new(),
        )
    });
    p.paint("more indicator", |b| {
        b.set_string(28, 3, "+1 below (j)", ratatui::style::Style::new())
    });
    assert_eq!(p.clashes().len(), 10);
    assert!(gpumon::tui::ui::paint::blank_share(&buf, buf.area) > 0.8);
}

#[test]
fn the_default_demo_shows_its_growth_alert_in_the_first_loop() {
    // The demo opens 40 s in and plays 165 s: the leak's alert must be on screen by the
    // time the first loop is half done, with its forecast.
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz");
    let app = app_from(demo.to_str().expect("path"), Some(60_000));
    let (_, _, text, clashes) = checked(&app, 80, 24, false);
    assert!(clashes.is_empty(), "{clashes:?}");
    assert!(text.contains("leak +96"), "growth alert on screen:\n{text}");
    assert!(text.contains("OOM"), "with its forecast:\n{text}");
    assert_eq!(app.pipe.state.gpus.len(), 2);
}

#[test]
fn drawing_a_large_screen_is_cheap() {
    // A budget, not a benchmark: the 8-GPU overview and detail at 200x60, 50 frames each,
    // stay far under the 250 ms data redraw interval even in a debug build.
    let path = combine::eight_gpu_file();
    let app = app_from(path.to_str().expect("path"), None);
    let theme = theme(false);
    for view in [View::Overview, View::Detail] {
        let app = with_view(app_from(path.to_str().expect("path"), None), view);
        let mut term =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).expect("backend");
        let t = std::time::Instant::now();
        for _ in 0..50 {
            term.draw(|f| gpumon::tui::ui::draw(f, &app, &theme))
                .expect("draw");
        }
        let per = t.elapsed() / 50;
        eprintln!("{view:?} 200x60: {per:?} per frame (debug build)");
        assert!(
            per < std::time::Duration::from_millis(60),
            "{view:?}: {per:?} per frame"
        );
    }
    drop(app);
}

/// Clicks land on what the new layout drew there: a compact GPU row selects its GPU, a
/// process row inside the selected card selects that process (the click map is built by
/// the same draw, so this checks the coordinates it registers).
#[test]
fn clicks_hit_compact_rows_and_process_rows_of_the_layout() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    use gpumon::tui::event::Event;
    let path = combine::eight_gpu_file();
    let mut app = app_from(path.to_str().expect("path"), None);
    app.sync();
    let click = |column, row| {
        Event::from(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    let (_, _, text, _) = checked(&app, 80, 24, false);
    let row_of = |text: &str, what: &str| {
        text.lines()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what} not drawn:\n{text}")) as u16
    };
    // GPU 5 is a compact row at this size: clicking its name selects it.
    let y = row_of(&text, " GPU5 ");
    app.update(click(3, y));
    assert_eq!(app.gpu, 5, "{text}");
    // Now GPU 5 has the card; on a larger screen it shows several process rows: click
    // the second.
    let (_, _, text, _) = checked(&app, 120, 40, false);
    let pids = app.pids();
    assert!(pids.len() >= 2, "{text}");
    let second = format!(" {} ", pids[1]);
    let y = text
        .lines()
        .position(|l| l.starts_with('│') && l.contains(&second))
        .unwrap_or_else(|| panic!("{second} not drawn:\n{text}")) as u16;
    app.update(click(10, y));
    assert_eq!(app.sel_pid, Some(pids[1]), "{text}");
    // The selection is drawn reversed on that row.
    let mut buf = Buffer::empty(Rect::new(0, 0, 120, 40));
    gpumon::tui::ui::draw_checked(&mut buf, &app, &theme(false));
    assert!(
        buf[(10, y)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED),
        "{text}"
    );
}
