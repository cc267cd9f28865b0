//! The smaller findings of issue 25 that the command line shows: what `--listen :0`
//! got, shorthand addresses, and a header with more GPUs than any host has.

use std::io::BufRead;
use std::time::Duration;

use crate::support::{fixture, gpumon};

/// `--listen :0` printed `http://127.0.0.1:0/metrics`: a port nobody can scrape.
#[test]
fn listen_on_port_0_prints_the_port_it_got() {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let mut child = std::process::Command::new(bin)
        .args(["serve", "--listen", ":0", "--replay"])
        .arg(fixture("h200_torch_grow_shrink.jsonl"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !line.contains("serving metrics") && std::time::Instant::now() < deadline {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    assert_ne!(port, 0, "{line}");
}

#[test]
fn a_shorthand_ipv4_host_is_refused() {
    let out = gpumon()
        .args(["serve", "--listen", "0:9464"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0.0.0.0:9464"));
}
