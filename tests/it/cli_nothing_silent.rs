//! Nothing silent: a filter that matches nothing is an error when live (before any output
//! is created) and a warning on a replay, a process filter that has kept nothing for a while
//! says so, and commands that read no configuration work with a broken one.

use std::path::Path;

use predicates::prelude::*;

use crate::support::gpumon;

fn demo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz")
}

/// Live filters that match nothing: status 2, the reason, and no recording left behind.
#[test]
fn a_live_filter_that_matches_nothing_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rec.jsonl");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--user", "no-such-user-gpumon"],
            "--user no-such-user-gpumon: no such user",
        ),
        // Above any pid_max (4194304): never running.
        (&["--pid", "4194399"], "--pid 4194399: no such process"),
        (&["--gpu", "7"], "--gpu 7 matches no GPU"),
    ];
    for (args, says) in cases {
        gpumon()
            .args(["record", "-o"])
            .arg(&out)
            .args(["--duration", "5s", "--socket-dir"])
            .arg(dir.path())
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*says));
        assert!(!out.exists(), "{args:?}: no recording was started");
        gpumon()
            .args(["serve", "--listen", "127.0.0.1:0", "--socket-dir"])
            .arg(dir.path())
            .args(*args)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*says));
    }
    // A user who exists and a running pid are accepted (the run ends at --duration).
    gpumon()
        .args(["record", "-o"])
        .arg(&out)
        .args([
            "--duration",
            "1s",
            "--interval",
            "100ms",
            "--user",
            "root",
            "--socket-dir",
        ])
        .arg(dir.path())
        .args(["--pid", &std::process::id().to_string()])
        .assert()
        .success();
}

/// A replay plays on, and says why nothing shows: the GPUs it has, or the candidates of
/// an ambiguous UUID prefix.
#[test]
fn a_replay_filter_that_matches_nothing_is_a_warning() {
    gpumon()
        .args(["replay", "--headless", "--gpu", "7"])
        .arg(demo())
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "--gpu 7 matches no GPU: the GPUs are 0 GPU-667ff246…, 1 GPU-ec5193ac…",
        ));
    gpumon()
        .args(["replay", "--headless", "--gpu", "GPU-"])
        .arg(demo())
        .assert()
        .success()
        .stderr(
            predicate::str::contains("--gpu GPU- is ambiguous")
                .and(predicate::str::contains("GPU-667ff246… (GPU 0)"))
                .and(predicate::str::contains("GPU-ec5193ac… (GPU 1)")),
        );
    gpumon()
        .args(["replay", "--headless", "--gpu", "GPU-667f"])
        .arg(demo())
        .assert()
        .success()
        .stderr(predicate::str::contains("--gpu").not());
}

/// A headless job whose process filter keeps nothing says so after a minute (data time:
/// the recording is played at full speed).
#[test]
fn a_process_filter_that_keeps_nothing_for_a_while_says_so() {
    gpumon()
        .args(["replay", "--headless", "--user", "nobody-here"])
        .arg(demo())
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "--user nobody-here has matched no GPU process for ~1 min",
        ));
}

/// Commands that read no configuration work with a broken one; one that reads it still
/// refuses it, naming the file.
#[test]
fn a_broken_config_breaks_only_what_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("gpumon")).expect("mkdir");
    std::fs::write(dir.path().join("gpumon/config.toml"), "interval = [[[\n").expect("write");
    let run = |args: &[&str]| {
        let mut c = gpumon();
        c.env("XDG_CONFIG_HOME", dir.path()).args(args);
        c
    };
    for args in [
        &["completions", "bash"][..],
        &["completions", "fish"],
        &["man"],
        &["demo", "list"],
        &["--help"],
        &["record", "--help"],
    ] {
        run(args).assert().success();
    }
    let man = dir.path().join("man1");
    run(&["man", "--dir", man.to_str().expect("utf-8")])
        .assert()
        .success();
    // No GPU here: 69; with one, 0. Never the configuration's 2.
    run(&["snapshot", "--json"])
        .assert()
        .code(predicate::in_iter([0, 69]));
    run(&["replay", "--headless"])
        .arg(demo())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("config.toml"));
}
