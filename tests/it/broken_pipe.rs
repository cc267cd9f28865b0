//! A reader that stops early (`gpumon replay FILE --headless --alerts-jsonl - | head -1`)
//! ends gpumon quietly with status 0, as other Unix tools end. Before: exit 1
//! and "output stopped: cannot write stdout: Broken pipe"; `snapshot`, `demo list` and
//! `config` panicked in `println!`; `--csv -` and `--jsonl -` wrote a file named `-`. Every
//! writer to stdout is run with a pipe whose reader is already gone (each write fails with
//! EPIPE: no race with the reader), and once through a real `| head -1`.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-leaks.gpumon.jsonl.gz")
}

/// The write end of a pipe whose read end is closed.
fn reader_gone() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two new descriptors; the read end is closed at once and the write
    // end is owned by the Stdio from here on.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

/// `gpumon ARGS` writing to a closed pipe: (status, stderr).
fn to_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdout(reader_gone())
        .stderr(Stdio::piped())
        .output()
        .expect("gpumon runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_stdout_output_ends_quietly_with_status_0_when_its_reader_is_gone() {
    let demo = demo();
    let demo = demo.to_str().expect("utf-8 path");
    let cases: Vec<Vec<&str>> = vec![
        vec!["replay", "--headless", "--alerts-jsonl", "-", demo],
        vec!["replay", "--headless", "--csv", "-", demo],
        vec!["replay", "--headless", "--jsonl", "-", demo],
        vec!["report", demo, "-o", "-"],
        vec!["report", demo, "--format", "md"],
        vec!["demo", "list"],
        vec!["config", "--print-default"],
        vec!["config", "--path"],
        vec!["man"],
        vec!["completions", "bash"],
    ];
    for args in cases {
        let (code, stderr) = to_closed_pipe(&args);
        assert_eq!(code, Some(0), "gpumon {}: {stderr}", args.join(" "));
        assert!(
            !stderr.contains("Broken pipe") && !stderr.contains("panicked"),
            "gpumon {}: {stderr}",
            args.join(" ")
        );
    }
}

/// Through a real pipe into `head -1`: the CSV (481 KB) is more than a pipe holds, so
/// gpumon is still writing when `head` leaves.
#[test]
fn rows_piped_into_head_end_with_status_0_and_the_first_line() {
    let script = format!(
        "set -o pipefail; {} replay {} --headless --csv - | head -1",
        env!("CARGO_BIN_EXE_gpumon"),
        demo().display()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("time,time_unix_ms,"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn csv_to_stdout_is_the_same_as_to_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rows.csv");
    let run = |out: &str| {
        Command::new(env!("CARGO_BIN_EXE_gpumon"))
            .args(["replay", "--headless", "--csv", out])
            .arg(demo())
            .output()
            .expect("gpumon runs")
    };
    let piped = run("-");
    assert!(piped.status.success());
    assert!(run(file.to_str().expect("utf-8")).status.success());
    let written = std::fs::read(&file).expect("csv written");
    assert!(written.len() > 10_000);
    assert_eq!(piped.stdout, written, "`--csv -` writes the file's rows");
}
