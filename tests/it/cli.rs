//! The command line: bad flags, missing, corrupt and truncated recordings give clear
//! errors and non-zero exits, never a panic; headless modes work without a GPU.

use crate::support::{fixture, gpumon};
use predicates::prelude::*;

fn no_panic() -> impl Predicate<str> {
    predicate::str::contains("panicked").not()
}

#[test]
fn bad_flags_are_usage_errors() {
    gpumon()
        .arg("--bogus")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--bogus"));
    gpumon()
        .args(["record", "-o", "/tmp/x", "--interval", "5ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("below the 10 ms minimum"));
    gpumon()
        .args(["replay", "x", "--speed", "fast"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid speed 'fast'"));
    gpumon()
        .args(["watch", "--exit-on-alert", "loud"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("use info, warning or critical"));
}

#[test]
fn missing_recording_is_a_clear_error() {
    gpumon()
        .args(["replay", "/nonexistent/rec.jsonl"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cannot open recording /nonexistent/rec.jsonl",
        ))
        .stderr(no_panic());
}

#[test]
fn corrupt_recording_names_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = std::fs::read_to_string(fixture("h200_idle.jsonl")).expect("fixture");
    let mut lines: Vec<&str> = src.lines().collect();
    lines[5] = "{\"type\":\"tick\",\"t\":12,\"gpus\":[{oops";
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    gpumon()
        .args(["replay", "--headless", "--strict"])
        .arg(&path)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad.jsonl:6:32: invalid frame"))
        .stderr(no_panic());
    // Without --strict the line is skipped, named in a warning.
    gpumon()
        .args(["replay", "--headless"])
        .arg(&path)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "skipped 1 corrupt line (line 6, column 32:",
        ))
        .stderr(no_panic());
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, [0xff_u8, 0xfe, 0, 1, 2, b'\n']).expect("write");
    gpumon()
        .arg("replay")
        .arg(&garbage)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("garbage.bin:1"))
        .stderr(no_panic());
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write");
    gpumon()
        .arg("replay")
        .arg(&empty)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("empty file"));
}

#[test]
fn truncated_last_line_is_tolerated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut src =
        std::fs::read_to_string(fixture("h200_torch_grow_shrink.jsonl")).expect("fixture");
    src.truncate(src.len() - 40);
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, src).expect("write");
    let csv = dir.path().join("out.csv");
    gpumon()
        .args(["replay", "--headless", "--csv"])
        .arg(&csv)
        .arg(&path)
        .assert()
        .success()
        .stderr(no_panic());
    let rows = std::fs::read_to_string(&csv).expect("csv written");
    // Header + one GPU row per tick + process rows: the whole file minus the cut line.
    assert!(rows.lines().count() > 160, "{} rows", rows.lines().count());
    // The process column names the script (python3 grow_shrink.py ...), as the screen does.
    assert!(rows.contains(",process,0,") && rows.contains(",461,root,grow_shrink.py,"));
}

#[test]
fn snapshot_without_a_gpu_says_so() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    gpumon()
        .args(["snapshot", "--json"])
        .assert()
        .code(69)
        .stderr(predicate::str::contains("no NVIDIA driver found"))
        .stderr(no_panic());
}

#[test]
fn headless_replay_prints_alerts_as_json_lines() {
    let out = gpumon()
        .args(["replay", "--headless", "--alerts-jsonl", "-"])
        // The real run whose cache shatters until a 64 MiB request fails (the first corpus).
        .arg(fixture("../corpus/corpus_frag.jsonl"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    for v in &lines {
        assert!(v["kind"].is_string() && v["time"].is_string(), "{v}");
    }
    let raised = |kind: &str| {
        lines
            .iter()
            .any(|v| v["change"] == "raised" && v["kind"] == kind && v["epoch"].is_u64())
    };
    assert!(raised("fragmentation_risk"), "risk not raised: {lines:?}");
    assert!(raised("fragmentation_oom"), "OOM not reported: {lines:?}");
}

#[test]
fn record_without_nvml_still_writes_a_valid_recording() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let sockets = dir.path().join("sock");
    gpumon()
        .args(["record", "--duration", "500ms", "--socket-dir"])
        .arg(&sockets)
        .arg("-o")
        .arg(&rec)
        .assert()
        .success()
        .stderr(predicate::str::contains("recording companions only"));
    gpumon()
        .args(["replay", "--headless"])
        .arg(&rec)
        .assert()
        .success();
}
