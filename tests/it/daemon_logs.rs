//! `record`/`serve --log-level`: every stderr line starts with its UTC time and level, and
//! lines below the level are dropped; without the flag, the plain lines are unchanged.

use crate::support::gpumon;

/// `2026-12-04T18:16:40.986Z INFO  gpumon: ...` → (level, message).
fn stamped(line: &str) -> Option<(&str, &str)> {
    let (time, rest) = line.split_once(' ')?;
    let b = time.as_bytes();
    let shape = time.len() == 24
        && b[4] == b'-'
        && b[10] == b'T'
        && b[19] == b'.'
        && b[23] == b'Z'
        && time[..4].bytes().all(|c| c.is_ascii_digit());
    if !shape {
        return None;
    }
    let level = rest.get(..5)?.trim_end();
    let msg = rest.get(6..)?;
    ["ERROR", "WARN", "INFO"]
        .contains(&level)
        .then_some((level, msg))
}

fn record(level: Option<&str>) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("s");
    std::fs::create_dir(&sock).expect("mkdir");
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let mut cmd = gpumon();
    cmd.args(["record", "--interval", "100ms", "--duration", "300ms", "-o"])
        .arg(dir.path().join("r.gpumon.jsonl.gz"))
        .arg("--socket-dir")
        .arg(&sock);
    if let Some(l) = level {
        cmd.args(["--log-level", l]);
    }
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).expect("utf-8")
}

#[test]
fn info_stamps_every_line_and_says_what_it_records() {
    let err = record(Some("info"));
    let lines: Vec<(&str, &str)> = err
        .lines()
        .map(|l| stamped(l).unwrap_or_else(|| panic!("not stamped: {l:?}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|(lv, m)| *lv == "INFO" && m.starts_with("gpumon: recording ")),
        "{err}"
    );
}

#[test]
fn warn_drops_the_info_lines() {
    let err = record(Some("warn"));
    for l in err.lines() {
        let (level, _) = stamped(l).unwrap_or_else(|| panic!("not stamped: {l:?}"));
        assert_ne!(level, "INFO", "{err}");
    }
    assert!(!err.contains("gpumon: recording "), "{err}");
}

#[test]
fn without_a_level_the_lines_stay_plain() {
    let err = record(None);
    assert!(
        err.lines().any(|l| l.starts_with("gpumon: recording ")),
        "{err}"
    );
    assert!(err.lines().all(|l| stamped(l).is_none()), "{err}");
}

#[test]
fn an_unknown_level_is_a_usage_error() {
    gpumon()
        .args(["serve", "--log-level", "verbose"])
        .assert()
        .code(2);
}
