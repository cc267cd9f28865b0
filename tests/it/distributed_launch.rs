//! A fake `torchrun` launch under `gpumon run` (python/tests/fake_torchrun): every rank gets a
//! companion that reports its rank; the launcher and the ranks' spawn workers (DataLoader
//! style, no CUDA) get none.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn has_python() -> bool {
    Command::new("python3")
        .args(["-c", "import sys; assert sys.version_info >= (3, 9)"])
        .status()
        .is_ok_and(|s| s.success())
}

fn sockets(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sock"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn ranks_get_companions_and_helpers_do_not() {
    if !has_python() {
        assert!(std::env::var_os("CI").is_none(), "CI needs python3");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let tmp = tempfile::tempdir().expect("tempdir");
    let sock = tmp.path().join("sock");
    std::fs::create_dir(&sock).expect("mkdir");
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let rec = tmp.path().join("rec.jsonl");
    let bin = env!("CARGO_BIN_EXE_gpumon");
    let mut recorder = Command::new(bin)
        .args([
            "record",
            "--format",
            "ndjson",
            "--interval",
            "100ms",
            "--socket-dir",
        ])
        .arg(&sock)
        .arg("-o")
        .arg(&rec)
        .stderr(Stdio::null())
        .spawn()
        .expect("gpumon record");
    let mut job = Command::new(bin)
        .env("GPUMON_DIR", &sock)
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .args(["run", "--", "python3"])
        .arg(format!("{root}/python/tests/fake_torchrun/torchrun"))
        .arg("2")
        .arg(format!("{root}/python/tests/fake_torchrun/rank.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gpumon run");
    let mut line = String::new();
    BufReader::new(job.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("launcher output");
    let ranks: Vec<String> = line
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    assert_eq!(ranks.len(), 2, "launcher said {line:?}");

    // Both ranks and their spawn workers are running now: only the ranks have sockets.
    let want: Vec<String> = {
        let mut w: Vec<String> = ranks.iter().map(|p| format!("{p}.sock")).collect();
        w.sort();
        w
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    let mut ranks_recorded = false;
    while Instant::now() < deadline {
        seen = sockets(&sock);
        let text = std::fs::read_to_string(&rec).unwrap_or_default();
        ranks_recorded = (0..2).all(|r| {
            text.lines()
                .any(|l| l.contains("\"type\":\"hello\"") && l.contains(&format!("\"rank\":{r},")))
        });
        if seen == want && ranks_recorded {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(job.stdin.take());
    let status = job.wait().expect("job ends");
    let _ = recorder.kill();
    let _ = recorder.wait();
    assert_eq!(seen, want, "sockets of ranks {ranks:?}");
    assert!(
        ranks_recorded,
        "both ranks' hellos, with their rank, reached gpumon"
    );
    assert!(status.success(), "{status}");
}
