//! `replay --follow` attaches to a recording that is still being written: frames appended
//! later (even a line written in two pieces, as a recorder mid-flush does) reach the model.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::jsonl::{header, now_ms, tick};

#[test]
fn follow_picks_up_frames_appended_after_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111)).expect("write");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("gpumon"))
        .args(["replay", "--follow", "--headless", "--csv"])
        .arg(&csv)
        .arg(&rec)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpumon starts");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&rec)
        .expect("open");
    std::thread::sleep(Duration::from_millis(400));
    let late = tick(now_ms(), 222_000_000);
    let (a, b) = late.split_at(late.len() / 2);
    f.write_all(a.as_bytes()).expect("append");
    f.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(400));
    f.write_all(b.as_bytes()).expect("append");
    f.write_all(tick(now_ms(), 333_000_000).as_bytes())
        .expect("append");
    f.flush().expect("flush");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rows = String::new();
    while Instant::now() < deadline {
        rows = std::fs::read_to_string(&csv).unwrap_or_default();
        if rows.contains(",333000000,") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(rows.contains(",111,"), "first tick missing:\n{rows}");
    assert!(
        rows.contains(",222000000,"),
        "tick written in two pieces missing:\n{rows}"
    );
    assert!(rows.contains(",333000000,"), "later tick missing:\n{rows}");
}
