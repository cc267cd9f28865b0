//! Every output fails loudly: the alert log, CSV and JSONL outputs stop
//! with one line and exit 1 when the disk refuses a write, survive `ulimit -f`, and leave
//! files that end at a line. Before: exit 0 and silence on a full disk (0 of 8 alerts
//! written), death by SIGXFSZ (exit 153, no message, a line cut in half) under `ulimit -f`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// 14.8 KB of alerts, 481 KB of CSV and 1.36 MB of JSONL when replayed headless.
fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-leaks.gpumon.jsonl.gz")
}

/// `gpumon replay --headless FLAG out` under an optional file-size limit.
fn replay(flag: &str, out: &Path, fsize_limit: Option<u64>) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpumon"));
    cmd.args(["replay", "--headless", flag])
        .arg(out)
        .arg(demo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(limit) = fsize_limit {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child yet.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let o = cmd.output().expect("run gpumon");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_loud_and_whole(code: Option<i32>, stderr: &str, out: &Path, why: &str) {
    assert_eq!(
        code,
        Some(1),
        "exit status (None = killed by a signal); stderr: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    let want = format!(
        "gpumon: output stopped: cannot write {}: {why}",
        out.display()
    );
    assert!(lines[0].starts_with(&want), "{}\nwant {want}", lines[0]);
    let bytes = std::fs::read(out).expect("read output");
    assert!(!bytes.is_empty(), "nothing written before the limit");
    assert_eq!(bytes.last(), Some(&b'\n'), "file ends mid-line");
}

const LIMIT: u64 = 8 * 1024;

#[test]
fn a_file_size_limit_stops_each_output_loudly_at_a_line() {
    let dir = tempfile::tempdir().expect("dir");
    for (flag, name) in [
        ("--alerts-jsonl", "alerts.jsonl"),
        ("--csv", "rows.csv"),
        ("--jsonl", "rows.jsonl"),
    ] {
        let out = dir.path().join(name);
        let (code, stderr) = replay(flag, &out, Some(LIMIT));
        assert_loud_and_whole(code, &stderr, &out, "File too large");
        assert!(std::fs::metadata(&out).expect("stat").len() <= LIMIT);
    }
}

/// The harness fails for the reason it names: without a limit each output outgrows it.
#[test]
fn without_a_limit_each_output_is_larger_than_the_limit() {
    let dir = tempfile::tempdir().expect("dir");
    for (flag, name) in [("--alerts-jsonl", "alerts.jsonl"), ("--csv", "rows.csv")] {
        let out = dir.path().join(name);
        let (code, stderr) = replay(flag, &out, None);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            std::fs::metadata(&out).expect("stat").len() > LIMIT,
            "{name}"
        );
    }
}

/// A full disk: an 8 KiB tmpfs (needs root to mount; skipped otherwise).
#[test]
fn a_full_disk_stops_the_alert_log_loudly() {
    let mnt = tempfile::tempdir().expect("temp dir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8k", "tmpfs"])
        .arg(mnt.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(mnt.path());
    let out = mnt.path().join("alerts.jsonl");
    let (code, stderr) = replay("--alerts-jsonl", &out, None);
    assert_loud_and_whole(code, &stderr, &out, "No space left on device");
}
