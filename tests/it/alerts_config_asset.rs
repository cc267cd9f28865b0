//! `assets/alerts-config.json` lists every alert threshold with its default: it must stay
//! equal to `AlertConfig::default()`, and `--alerts-config` must accept it and reject junk.

use assert_cmd::Command;
use gpumon::model::alerts::config::AlertConfig;
use predicates::prelude::*;

fn asset() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/alerts-config.json")
}

#[test]
fn the_asset_is_the_default_configuration() {
    let text = std::fs::read_to_string(asset()).expect("asset exists");
    // Key by key first: a section missing from the asset reads as its default, so the
    // parsed configuration alone would not show that the asset forgot a new rule.
    let raw: serde_json::Value = serde_json::from_str(&text).expect("asset is JSON");
    let default = serde_json::to_value(AlertConfig::default()).expect("default serializes");
    assert_eq!(
        raw,
        default,
        "regenerate with: {}",
        serde_json::to_string_pretty(&AlertConfig::default()).unwrap_or_default()
    );
    let parsed: AlertConfig = serde_json::from_str(&text).expect("asset parses");
    assert_eq!(
        parsed,
        AlertConfig::default(),
        "regenerate with: {}",
        serde_json::to_string_pretty(&AlertConfig::default()).unwrap_or_default()
    );
}

/// `gpumon replay --headless --alerts-config CONFIG` over a real recording.
fn replay_with(config: &std::path::Path) -> assert_cmd::assert::Assert {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200_torch_grow_shrink.jsonl");
    Command::cargo_bin("gpumon")
        .expect("binary")
        .args(["replay", "--headless", "--alerts-config"])
        .arg(config)
        .arg(&fixture)
        .assert()
}

#[test]
fn alerts_config_flag_accepts_the_asset_and_names_a_bad_file() {
    replay_with(&asset()).success();
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"growth\": {\"alpha\": \"high\"}}").expect("write");
    replay_with(&bad)
        .code(2)
        .stderr(predicate::str::contains("invalid alert configuration"))
        .stderr(predicate::str::contains("bad.json"));
}

/// A value of the right type that no rule can use (`confirm = 0`: a rule that never needs
/// to pass) is refused by key, in the JSON flag and in the config file's `[alerts]`.
#[test]
fn values_out_of_range_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("zero.json");
    std::fs::write(&bad, "{\"growth\": {\"confirm\": 0}}").expect("write");
    replay_with(&bad).code(2).stderr(predicate::str::contains(
        "growth.confirm must be at least 1",
    ));
    let toml = dir.path().join("gpumon.toml");
    std::fs::write(&toml, "[alerts.growth]\nmax_window = 2\n").expect("write");
    Command::cargo_bin("gpumon")
        .expect("binary")
        .args(["--config"])
        .arg(&toml)
        .args(["replay", "--headless"])
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/h200_torch_grow_shrink.jsonl"),
        )
        .assert()
        .failure()
        .stderr(predicate::str::contains("alerts.growth.max_window"));
}
