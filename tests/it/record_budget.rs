//! A hostile companion cannot fill the disk through the recorder.
//! Before: re-sending one 64 KB histogram wrote 860 MB per 30 s, a
//! marker flood 179 MB per 30 s.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::process::Command;

use gpumon::record::budget::{BURST_BYTES, BYTES_PER_S};

use crate::support::channel::{HELLO, private_dir};
use crate::support::serial;

/// This test process as a companion flooding `line` (after its hello).
fn flood(dir: &std::path::Path, line: String) {
    let l = UnixListener::bind(dir.join(format!("{}.sock", std::process::id()))).expect("bind");
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = writeln!(s, "{HELLO}");
            let chunk = line.repeat(64);
            while s.write_all(chunk.as_bytes()).is_ok() {}
        }
    });
}

fn recorded_bytes(line: String, seconds: f64) -> u64 {
    let _flood = serial::flood();
    let sockets = private_dir();
    flood(sockets.path(), line);
    let out = tempfile::tempdir().expect("dir");
    let rec = out.path().join("r.jsonl");
    let st = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args([
            "record",
            // The budget holds the text; gzip would hide what it lets through.
            "--format",
            "ndjson",
            "--duration",
            &format!("{}ms", (seconds * 1000.0) as u64),
            "--socket-dir",
        ])
        .arg(sockets.path())
        .arg("-o")
        .arg(&rec)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run");
    assert!(st.success());
    std::fs::metadata(&rec).expect("stat").len()
}

fn bound(seconds: f64) -> u64 {
    // The budget, plus the header and gpumon's own status lines.
    (BURST_BYTES + seconds * BYTES_PER_S) as u64 + 64 * 1024
}

#[test]
fn a_resent_histogram_is_not_recorded_again_and_again() {
    let hist: Vec<String> = (0..1400)
        .map(|i| format!("[{},{},{}]", i % 64, i, i * 4096))
        .collect();
    let line = format!(
        "{{\"v\":1,\"type\":\"frag\",\"dev\":0,\"free_total\":100,\"largest_free\":50,\"hist\":[{}]}}\n",
        hist.join(",")
    );
    let n = recorded_bytes(line, 2.0);
    assert!(n < 1024 * 1024, "{n} bytes for one unchanged histogram");
}

#[test]
fn a_marker_flood_is_held_to_the_byte_budget() {
    let label = "m".repeat(900);
    let line = format!("{{\"v\":1,\"type\":\"marker\",\"kind\":\"mark\",\"label\":\"{label}\"}}\n");
    let n = recorded_bytes(line, 2.0);
    assert!(n <= bound(2.0), "{n} bytes in 2 s, bound {}", bound(2.0));
}

#[test]
fn a_sample_flood_is_thinned() {
    let line =
        "{\"v\":1,\"type\":\"sample\",\"dev\":0,\"allocated\":5,\"reserved\":9}\n".to_string();
    let n = recorded_bytes(line, 2.0);
    // 20 per second at most, about 150 bytes each, plus link counters.
    assert!(n < 64 * 1024, "{n} bytes");
}
