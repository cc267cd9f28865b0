//! Exit statuses as docs/install.md's table says: an unknown demo is a bad value (2), and a
//! clean stop by signal returns 0 in every headless mode, with its outputs complete.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::support::gpumon;

#[test]
fn an_unknown_demo_is_a_usage_error() {
    gpumon().args(["demo", "nosuch"]).assert().code(2).stderr(
        predicate::str::contains("no bundled recording named 'nosuch'")
            .and(predicate::str::contains("gpumon demo NAME")),
    );
}

fn wait(child: &mut Child, within: Duration) -> Option<i32> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().expect("wait") {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

fn stop_with(child: &mut Child, sig: i32) -> Option<i32> {
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    wait(child, Duration::from_secs(20))
}

#[test]
fn record_and_serve_stopped_by_sigterm_or_sighup_return_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let out = dir.path().join(format!("rec{sig}.jsonl"));
        let mut rec = Command::new(&bin)
            .args(["record", "--interval", "100ms", "-o"])
            .arg(&out)
            .arg("--socket-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("record starts");
        let end = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&out).map_or(true, |m| m.len() == 0) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            stop_with(&mut rec, sig),
            Some(0),
            "record stopped by signal {sig}"
        );
        // Compressed by default: a clean stop closes the gzip member, so the whole file
        // decodes (a stream cut short would fail here) and ends with a whole line.
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(&out).expect("recording")),
            &mut text,
        )
        .expect("the recording is a complete gzip stream");
        assert!(text.ends_with('\n'), "the recording ends with a whole line");
        for l in text.lines() {
            serde_json::from_str::<serde_json::Value>(l).expect("every line is JSON");
        }

        let mut serve = Command::new(&bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--socket-dir"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve starts");
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            stop_with(&mut serve, sig),
            Some(0),
            "serve stopped by signal {sig}"
        );
    }
}

/// The other headless modes stop the same way: a live `watch --headless` and a
/// `replay --headless --follow` (which never ends by itself) return 0 on SIGTERM, SIGHUP
/// and SIGINT, and their CSV ends with a whole row.
#[test]
fn headless_watch_and_follow_stopped_by_a_signal_return_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz");
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        for mode in ["watch", "follow"] {
            let csv = dir.path().join(format!("{mode}{sig}.csv"));
            let mut cmd = Command::new(&bin);
            match mode {
                "watch" => cmd
                    .args(["watch", "--headless", "--interval", "100ms", "--socket-dir"])
                    .arg(dir.path()),
                _ => cmd.args(["replay", "--headless", "--follow"]).arg(&demo),
            };
            let mut child = cmd
                .arg("--csv")
                .arg(&csv)
                .stderr(Stdio::null())
                .spawn()
                .expect("starts");
            let end = Instant::now() + Duration::from_secs(20);
            while std::fs::metadata(&csv).map_or(true, |m| m.len() == 0) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_millis(500));
            assert_eq!(
                stop_with(&mut child, sig),
                Some(0),
                "{mode} stopped by signal {sig}"
            );
            let text = std::fs::read_to_string(&csv).expect("csv");
            assert!(text.starts_with("time,time_unix_ms,"), "{mode}: the header");
            assert!(
                text.ends_with('\n'),
                "{mode} {sig}: the CSV ends with a whole row"
            );
        }
    }
}
