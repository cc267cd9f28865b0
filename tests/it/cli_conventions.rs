//! Conventions a script or a scheduler relies on: every exit status gpumon documents (usage 2,
//! alert 3, no GPU 69, `run`: the program's own status, 127 not found, 126 not executable),
//! one duration grammar, the no-terminal message, completions, the man page, and the
//! configuration file's errors.

use crate::support::{self, gpumon};

use predicates::prelude::*;

/// A private cache and config dir, so no test reads the developer's files.
fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn usage_errors_exit_2() {
    gpumon().arg("--bogus").assert().code(2);
    gpumon()
        .args(["--interval", "10"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "'10' has no unit: write 10s or 10ms",
        ));
    gpumon()
        .args(["serve", "--listen", "19464"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(":PORT"));
    gpumon().args(["watch", "--gpu", "x"]).assert().code(2);
    gpumon()
        .args(["record", "-o", "/dev/null", "--duration", "60"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("60s"));
}

#[test]
fn a_misspelt_config_key_exits_2_naming_the_closest_key() {
    let h = home();
    let dir = h.path().join("gpumon");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("config.toml"), "[alerts.growth]\nalpah = 0.5\n").expect("write");
    gpumon()
        .env("XDG_CONFIG_HOME", h.path())
        .args(["replay", "--headless"])
        .arg(support::fixture("h200_idle.jsonl"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown key `alpah` (did you mean `alpha`?)",
        ));
    let alerts = h.path().join("alerts.json");
    std::fs::write(&alerts, r#"{"headroom": {"persist_msec": 1000}}"#).expect("write");
    gpumon()
        .args(["replay", "--headless", "--alerts-config"])
        .arg(&alerts)
        .arg(support::fixture("h200_idle.jsonl"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `persist_ms`"));
}

#[test]
fn compound_durations_on_flags_and_in_the_config() {
    gpumon()
        .args(["record", "-o", "/dev/null", "--duration", "1h30"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("write e.g. 1h30m"));
    let h = home();
    let file = h.path().join("c.toml");
    std::fs::write(&file, "interval = \"1s500ms\"\n").expect("write");
    gpumon()
        .arg("--config")
        .arg(&file)
        .arg("config")
        .assert()
        .success()
        .stdout(predicate::str::contains("valid"));
    std::fs::write(&file, "interval = \"1m30\"\n").expect("write");
    gpumon()
        .arg("--config")
        .arg(&file)
        .arg("config")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("write e.g. 1m30s"));
}

#[test]
fn the_printed_default_config_is_accepted() {
    let h = home();
    let out = gpumon()
        .args(["config", "--print-default"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let file = h.path().join("c.toml");
    std::fs::write(&file, out).expect("write");
    gpumon()
        .arg("--config")
        .arg(&file)
        .arg("config")
        .assert()
        .success()
        .stdout(predicate::str::contains("valid"));
}

#[test]
fn an_alert_exits_3() {
    gpumon()
        .args(["replay", "--headless", "--exit-on-alert", "warning"])
        .arg(support::fixture("../corpus/corpus_frag.jsonl"))
        .assert()
        .code(3)
        .stderr(predicate::str::contains("alert fired"));
}

#[test]
fn no_gpu_exits_69() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        // A driver is here: the same command must then succeed (still a real check).
        gpumon().arg("snapshot").assert().success();
        return;
    }
    gpumon()
        .arg("snapshot")
        .assert()
        .code(69)
        .stderr(predicate::str::contains("no NVIDIA driver found"));
}

#[test]
fn run_passes_the_status_through_and_exits_like_a_shell() {
    let h = home();
    let run = |args: &[&str]| {
        let mut c = gpumon();
        c.env("XDG_CACHE_HOME", h.path())
            .arg("run")
            .arg("--")
            .args(args);
        c
    };
    run(&["sh", "-c", "exit 5"]).assert().code(5);
    run(&["/nonexistent/program"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains("/nonexistent/program"));
    let plain = h.path().join("not-executable");
    std::fs::write(&plain, "echo hi\n").expect("write");
    run(&[plain.to_str().expect("utf-8")]).assert().code(126);
}

#[test]
fn the_interposer_gpumon_run_preloads_exists() {
    let h = home();
    let out = gpumon()
        .env("XDG_CACHE_HOME", h.path())
        .env_remove("LD_PRELOAD")
        .args(["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lib = String::from_utf8_lossy(&out).trim().to_string();
    assert!(lib.starts_with(&h.path().display().to_string()), "{lib}");
    let bytes = std::fs::read(&lib).expect("the preloaded file exists");
    assert_eq!(&bytes[..4], b"\x7fELF");
}

#[test]
fn without_a_terminal_one_line_says_what_to_do() {
    let out = gpumon()
        .arg("demo")
        .assert()
        .code(1)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&out);
    assert!(
        err.contains("no terminal") && err.contains("ssh -t") && err.contains("--headless"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn completions_and_man_page_come_from_the_cli() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef gpumon"),
        ("fish", "complete -c gpumon"),
    ] {
        gpumon()
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains(marker))
            .stdout(predicate::str::contains("exit-on-alert"));
    }
    gpumon()
        .arg("man")
        .assert()
        .success()
        .stdout(predicate::str::contains(".TH gpumon 1"))
        .stdout(predicate::str::contains("completions"));
}

/// htop's and nvitop's habits: `-1` is `gpumon snapshot` (same output and status), `-d`
/// counts tenths of a second, `-u`/`-p` filter as `--user`/`--pid` do.
#[test]
fn htop_and_nvitop_short_flags_do_what_they_do_there() {
    let snap = gpumon().args(["snapshot"]).output().expect("runs");
    let once = gpumon().args(["-1"]).output().expect("runs");
    assert_eq!(once.status.code(), snap.status.code());
    assert_eq!(
        String::from_utf8_lossy(&once.stdout),
        String::from_utf8_lossy(&snap.stdout)
    );
    assert_eq!(
        gpumon()
            .args(["watch", "--once"])
            .output()
            .expect("runs")
            .status
            .code(),
        snap.status.code()
    );
    gpumon()
        .args(["-1", "--record", "r.gpumon.jsonl.gz"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    gpumon()
        .args(["-d", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("tenths of a second"));
    let rec = support::fixture("h200_torch_grow_shrink.jsonl");
    let out = gpumon()
        .args([
            "replay",
            "--headless",
            "--jsonl",
            "-",
            "-u",
            "root",
            "-p",
            "461",
        ])
        .arg(&rec)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = String::from_utf8_lossy(&out.stdout);
    let pids: std::collections::BTreeSet<u64> = rows
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()?
                .get("pid")?
                .as_u64()
        })
        .collect();
    assert_eq!(pids.into_iter().collect::<Vec<_>>(), [461], "{rows}");
}
