//! Printed text is inert: what gpumon prints on stderr quotes
//! recordings, config files and peers, and a terminal escape or bidi control in them
//! changed the pane title and cleared the screen; a 200 MB value was repeated whole.

use crate::support::gpumon;

/// The bytes a terminal acts on: C0 controls but newline, DEL, C1, bidi and zero-width.
fn steering(out: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(out)
        .chars()
        .filter(|&c| c != '\n' && gpumon::fmt::is_steering(c))
        .collect()
}

const HOSTILE: &str = "\u{1b}]0;PWNED-TITLE\u{7}\u{1b}[2J\u{1b}[31mRED\u{202E}\u{2066}";

#[test]
fn a_recording_line_with_escapes_is_reported_inert() {
    let tmp = tempfile::tempdir().expect("tmp");
    let rec = tmp.path().join("esc.jsonl");
    let line = serde_json::json!({ "type": HOSTILE }).to_string();
    std::fs::write(&rec, format!("{line}\n")).expect("write");
    let out = gpumon()
        .args(["replay", "--headless"])
        .arg(&rec)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PWNED-TITLE"),
        "the message still says what was wrong"
    );
    assert_eq!(
        steering(&out.stderr),
        Vec::<char>::new(),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_config_value_with_escapes_or_of_any_size_is_quoted_inert_and_short() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = tmp.path().join("config.toml");
    let value = serde_json::to_string(HOSTILE).expect("toml basic strings take JSON escapes");
    std::fs::write(&cfg, format!("view = {value}\n")).expect("write");
    let out = gpumon()
        .arg("--config")
        .arg(&cfg)
        .args(["config"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        steering(&out.stderr),
        Vec::<char>::new(),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let big = "x".repeat(1 << 20);
    std::fs::write(&cfg, format!("view = \"{big}\"\n")).expect("write");
    let out = gpumon()
        .arg("--config")
        .arg(&cfg)
        .args(["config"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr.len() < 8 * 1024,
        "{} bytes of error for a 1 MiB value",
        out.stderr.len()
    );
}

#[test]
fn an_alerts_config_with_escapes_is_reported_inert() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = tmp.path().join("alerts.json");
    let key = serde_json::to_string(HOSTILE).expect("json");
    std::fs::write(&cfg, format!("{{{key}: 1}}")).expect("write");
    let out = gpumon()
        .args(["replay", "--headless", "--speed", "max", "--alerts-config"])
        .arg(&cfg)
        .arg(crate::support::fixture("h200_torch_grow_shrink.jsonl"))
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert_eq!(
        steering(&out.stderr),
        Vec::<char>::new(),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}
