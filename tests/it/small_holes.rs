//! Smaller holes that the command line shows: what `--listen :0`
//! got, shorthand addresses, and a header with more GPUs than any host has.

use std::io::BufRead;
use std::time::Duration;

use crate::support::jsonl::{header, now_ms, tick};
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
        .args(["serve", "--listen", "0:19464"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0.0.0.0:19464"));
}

/// `--follow` on a file replaced by a FIFO blocked in `open` without a word: it now
/// says so, keeps waiting without blocking, and follows the regular file that comes next.
#[test]
fn follow_says_when_the_file_became_a_fifo_and_goes_on_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.jsonl");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    std::fs::write(&rec, header(t0) + &tick(t0, 111_000_000)).expect("write");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--follow", "--headless", "--csv"])
        .arg(&csv)
        .arg(&rec)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpumon starts");
    let rows = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(8);
        while std::time::Instant::now() < deadline {
            if std::fs::read_to_string(&csv)
                .unwrap_or_default()
                .contains(needle)
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(rows(",111000000,"));
    std::fs::remove_file(&rec).expect("rm");
    let c = std::ffi::CString::new(rec.as_os_str().as_encoded_bytes()).expect("c");
    // SAFETY: mkfifo on a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_file(&rec).expect("rm fifo");
    let t1 = now_ms() + 1000;
    std::fs::write(&rec, header(t1) + &tick(t1, 222_000_000)).expect("write");
    let followed = rows(",222000000,");
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("replaced by a FIFO"), "{stderr}");
    assert!(
        followed,
        "the file after the FIFO was not followed: {stderr}"
    );
}
