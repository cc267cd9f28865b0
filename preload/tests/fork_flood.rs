//! `fork()` in a CUDA program never waits on a monitor:
//! the reporter's lock is no longer held across socket I/O, reads are
//! budgeted, the fork handler's wait is bounded, and connections are capped.
//! Before, a peer writing faster than the reporter read kept it inside
//! `read()` under the lock that the fork handler spins on.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn fork_under_flooding_monitors_stays_fast_and_connections_are_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_fake_cuda(dir.path());
    let exe = build_program(dir.path(), &c_dir().join("fork_flood.c"), "fork_flood");
    let sockdir = dir.path().join("sock");
    let lib = preload_lib();
    let mut child = Command::new(&exe)
        .arg("30")
        .env("LD_PRELOAD", &lib)
        .env("GPUMON_DIR", &sockdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert_eq!(line.trim(), "ready");
    let sock = wait_for_socket(&sockdir, child.id());

    // Four monitors that say hello and then write as fast as they can, and 40
    // connections that never say anything.
    let stop = Arc::new(AtomicBool::new(false));
    let mut floods = Vec::new();
    for _ in 0..4 {
        let (sock, stop) = (sock.clone(), Arc::clone(&stop));
        floods.push(std::thread::spawn(move || {
            let Ok(mut s) = UnixStream::connect(&sock) else {
                return;
            };
            let _ = s.write_all(
                b"{\"v\":1,\"type\":\"hello\",\"role\":\"monitor\",\"min_v\":1,\"max_v\":1}\n",
            );
            let junk = vec![b'x'; 1 << 20];
            while !stop.load(Ordering::Relaxed) && s.write_all(&junk).is_ok() {}
        }));
    }
    let idle: Vec<UnixStream> = (0..40)
        .filter_map(|_| UnixStream::connect(&sock).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let held = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .expect("fd dir")
        .count();

    let t0 = Instant::now();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    line.clear();
    out.read_line(&mut line).expect("result");
    let total = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    drop(idle);
    let status = child.wait().expect("wait");
    for f in floods {
        let _ = f.join();
    }
    assert!(status.success());
    let worst_us: u64 = line
        .trim()
        .strip_prefix("max_fork_us=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {line:?}"));
    eprintln!(
        "30 forks under 4 flooding monitors: slowest {worst_us} us, all {total:?}; program held {held} fds"
    );
    assert!(worst_us < 500_000, "a fork waited {worst_us} us");
    // The listener, 16 monitors and 8 pending connections at most, plus the
    // program's own descriptors (stdio, libraries): never one per connection.
    assert!(held < 48, "{held} descriptors held under 44 connections");
}
