//! `replay --follow --headless` reports every stop and follows a replaced file
//! Before: a re-created or renamed-over file froze the
//! replay on the old inode and a corrupt line ended it, both without a word.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::jsonl::{header, now_ms, tick};

fn follow(rec: &std::path::Path, csv: &std::path::Path) -> Child {
    follow_with(rec, csv, &[])
}

fn follow_with(rec: &std::path::Path, csv: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--follow", "--headless"])
        .args(extra)
        .arg("--csv")
        .arg(csv)
        .arg(rec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon starts")
}

fn wait_for_row(csv: &std::path::Path, needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline {
        if std::fs::read_to_string(csv)
            .unwrap_or_default()
            .contains(needle)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_recreated_file_is_followed_and_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111_000_000)).expect("write");
    let child = follow(&rec, &csv);
    assert!(wait_for_row(&csv, ",111000000,"));
    // The recorder restarts: the file is removed and written anew.
    std::fs::remove_file(&rec).expect("rm");
    let t1 = now_ms() + 1000;
    std::fs::write(&rec, header(t1) + &tick(t1, 222_000_000)).expect("write");
    let found = wait_for_row(&csv, ",222000000,");
    let stderr = stop(child);
    assert!(found, "the new file was not followed; stderr: {stderr}");
    assert!(stderr.contains("replaced"), "{stderr}");
}

#[test]
fn a_file_renamed_over_is_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111_000_000)).expect("write");
    let child = follow(&rec, &csv);
    assert!(wait_for_row(&csv, ",111000000,"));
    let next = dir.path().join("next.jsonl");
    let t1 = now_ms() + 1000;
    std::fs::write(&next, header(t1) + &tick(t1, 333_000_000)).expect("write");
    std::fs::rename(&next, &rec).expect("rename");
    let found = wait_for_row(&csv, ",333000000,");
    let stderr = stop(child);
    assert!(found, "still reading the old inode; stderr: {stderr}");
}

/// Not strict: the corrupt line is skipped with a warning and following goes on.
#[test]
fn a_corrupt_line_is_skipped_while_following() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111_000_000)).expect("write");
    let child = follow(&rec, &csv);
    assert!(wait_for_row(&csv, ",111000000,"));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&rec)
        .expect("open");
    f.write_all(b"{not a frame\x1b[2J}\n").expect("append");
    f.write_all(tick(t0 + 1000, 222_000_000).as_bytes())
        .expect("append");
    f.flush().expect("flush");
    let found = wait_for_row(&csv, ",222000000,");
    let stderr = stop(child);
    assert!(found, "the tick after the corrupt line was read: {stderr}");
    assert!(
        stderr.contains("live.jsonl: skipped 1 corrupt line (line 3, column 2:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\x1b'),
        "control characters reached the terminal"
    );
}

#[test]
fn a_corrupt_line_stops_a_strict_follow_loudly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111_000_000)).expect("write");
    let mut child = follow_with(&rec, &csv, &["--strict"]);
    assert!(wait_for_row(&csv, ",111000000,"));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&rec)
        .expect("open");
    f.write_all(b"{not a frame\x1b[2J}\n").expect("append");
    f.flush().expect("flush");
    let deadline = Instant::now() + Duration::from_secs(8);
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = stop(child);
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{stderr}");
    assert!(stderr.contains("live.jsonl:3:2: invalid frame"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "control characters reached the terminal"
    );
}
