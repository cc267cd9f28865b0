//! Headless and command-line habits: a headless replay says what it did,
//! `--speed` is honoured headless, a corrupt line is skipped and named (refused with
//! `--strict`), an output path is checked before the driver, error ranges say the truth,
//! and display flags exist only where there is a display.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::support::gpumon;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz")
}

/// The demo with line 51 and line 71 of the file broken (1-based, as an editor counts).
fn broken_demo(dir: &Path) -> PathBuf {
    let text = crate::support::read_text(&demo());
    let mut lines: Vec<&str> = text.lines().collect();
    lines[50] = "{\"type\":\"tick\",1:2}";
    lines[70] = "garbage";
    let path = dir.join("bad.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    path
}

#[test]
fn a_headless_replay_without_outputs_says_what_it_played() {
    let out = gpumon()
        .args(["replay", "--headless"])
        .arg(demo())
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The demo: 1817 lines = a header and 1816 frames, 2 minutes of 2 H200s.
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("gpumon: replayed ")
            && stdout.contains("demo.gpumon.jsonl.gz: 1816 frames over 2m45s")
            && stdout.contains(", 2 GPUs, 4 processes, 6 alerts raised"),
        "{stdout}"
    );
    // Asked for an output, it prints that output only.
    let dir = tempfile::tempdir().expect("tempdir");
    gpumon()
        .args(["replay", "--headless", "--csv"])
        .arg(dir.path().join("rows.csv"))
        .arg(demo())
        .assert()
        .success()
        .stdout("");
    // A filter that keeps nothing: the summary says so in its numbers.
    gpumon()
        .args(["replay", "--headless", "--gpu", "7"])
        .arg(demo())
        .assert()
        .success()
        .stdout(predicate::str::contains("0 GPUs, 0 processes"));
}

#[test]
fn speed_is_honoured_headless() {
    // 2 minutes at 60x: at least 2 s (the upper bound would depend on the machine's load).
    let t = Instant::now();
    gpumon()
        .args(["replay", "--headless", "--speed", "60"])
        .arg(demo())
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    assert!(
        t.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t.elapsed()
    );
    // --follow has no speed: refused, not ignored.
    gpumon()
        .args(["replay", "--headless", "--follow", "--speed", "2"])
        .arg(demo())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("'--speed <SPEED>'").and(predicate::str::contains("--follow")),
        );
}

#[test]
fn error_ranges_say_the_true_range() {
    for bad in ["0", "-1", "100001", "nan"] {
        gpumon()
            .args(["replay", "--speed", bad])
            .arg(demo())
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "must be above 0 and at most 100000",
            ));
    }
    // Both ends of the range are taken: the slowest plays on (stopped here), the fastest ends.
    gpumon()
        .args(["replay", "--headless", "--speed", "0.001"])
        .arg(demo())
        .timeout(Duration::from_secs(2))
        .assert()
        .interrupted();
    gpumon()
        .args(["replay", "--headless", "--speed", "100000"])
        .arg(demo())
        .assert()
        .success();
}

/// `--follow` shows the newest data: keys that step, seek or change speed say why they do
/// nothing there instead of doing nothing.
#[test]
fn follow_says_why_replay_keys_do_nothing() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use gpumon::source::replay::{ReplayStatus, Speed};
    use gpumon::tui::event::Event;
    let mut app = crate::support::app_from("h200_torch_grow_shrink.jsonl", Some(10_000));
    let t0 = app.pipe.state.header.as_ref().map_or(0, |h| h.started);
    app.update(Event::Replay(ReplayStatus {
        pos: t0 + 10_000,
        start: t0,
        end: None,
        speed: Speed::Times(1.0),
        paused: false,
        ended: false,
        following: true,
        looping: false,
    }));
    for c in ['[', ']', '<', '>', '{', '}'] {
        app.flash = None;
        let effect = app.update(Event::from(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
        assert_eq!(effect, None, "{c}");
        let flash = app.flash.clone().unwrap_or_default();
        assert!(
            flash == "--follow: no seeking or speed changes",
            "{c}: {flash}"
        );
    }
}

#[test]
fn a_corrupt_line_is_skipped_and_named_unless_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = broken_demo(dir.path());
    gpumon()
        .args(["replay", "--headless"])
        .arg(&bad)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "bad.jsonl: skipped 2 corrupt lines (first at line 51, column 16: key must be a \
             string); --strict refuses such a recording",
        ))
        .stdout(predicate::str::contains("1814 frames"));
    // The file's line and serde's column, never serde's "line 1".
    gpumon()
        .args(["replay", "--headless", "--strict"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("bad.jsonl:51:16: invalid frame: key must be a string")
                .and(predicate::str::contains("line 1").not()),
        );
    // The report plays what it can too, and says what it left out.
    gpumon()
        .args(["report", "--format", "md"])
        .arg(&bad)
        .assert()
        .success()
        .stderr(predicate::str::contains("skipped 2 corrupt lines"));
}

#[test]
fn an_unwritable_output_is_refused_before_the_driver_is_asked() {
    for args in [
        &["record", "-o", "/nonexistent/dir/x", "--duration", "1s"][..],
        &[
            "record",
            "--csv",
            "/nonexistent/dir/x.csv",
            "--duration",
            "1s",
        ],
        &["watch", "--headless", "--record", "/nonexistent/dir/x"],
    ] {
        let out = gpumon()
            .args(args)
            .timeout(Duration::from_secs(20))
            .assert()
            .code(1)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // One line, about the path: nothing about NVML, the driver or companions first.
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write") && stderr.contains("/nonexistent/dir"),
            "{args:?}: {stderr}"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    gpumon()
        .args(["record", "--duration", "1s", "-o"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("it is a directory"));
}

#[test]
fn snapshot_formats_are_chosen_and_checked() {
    gpumon()
        .args(["snapshot", "--json", "--format", "table"])
        .assert()
        .code(2);
    gpumon()
        .args(["snapshot", "--format", "yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("table").and(predicate::str::contains("json")));
    // Piped (not a terminal), no flag: JSON as before, so scripts keep working.
    if Path::new("/dev/nvidiactl").exists() {
        let out = gpumon()
            .arg("snapshot")
            .assert()
            .success()
            .get_output()
            .clone();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(v.get("gpus").is_some());
        gpumon()
            .args(["snapshot", "--format", "table"])
            .assert()
            .success()
            .stdout(
                predicate::str::starts_with("host ").and(predicate::str::contains("\nGPU  NAME")),
            );
    } else {
        gpumon()
            .args(["snapshot", "--format", "table"])
            .assert()
            .code(69)
            .stdout("");
        // A script asking for JSON gets the error as JSON on stdout, and the exit code.
        let out = gpumon()
            .args(["snapshot", "--json"])
            .assert()
            .code(69)
            .get_output()
            .clone();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.contains("NVIDIA driver")),
            "{v}"
        );
        assert_eq!(v["exit_code"], 69);
    }
}

/// `--ascii` and `--no-color` where there is a screen to draw, and nowhere else; a flag given
/// before a subcommand that does not take it is refused, not dropped.
#[test]
fn display_flags_only_where_they_act() {
    let help = |cmd: &str| {
        let out = gpumon()
            .args([cmd, "--help"])
            .assert()
            .success()
            .get_output()
            .clone();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for cmd in ["watch", "replay", "demo"] {
        let h = help(cmd);
        assert!(
            h.contains("--ascii") && h.contains("--no-color"),
            "{cmd}: {h}"
        );
    }
    for cmd in [
        "run", "snapshot", "serve", "record", "report", "config", "man",
    ] {
        let h = help(cmd);
        assert!(
            !h.contains("--ascii") && !h.contains("--no-color"),
            "{cmd}: {h}"
        );
    }
    gpumon()
        .args(["snapshot", "--ascii"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unexpected argument '--ascii'"));
    gpumon()
        .args(["--no-color", "replay", "--headless"])
        .arg(demo())
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--no-color is given before 'replay', which does not read it there",
        ));
    gpumon()
        .args(["-i", "2s", "record", "--duration", "1s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--interval is given before 'record'",
        ));
    gpumon()
        .args(["replay", "--headless", "--no-color"])
        .arg(demo())
        .assert()
        .success();
}
