//! The dashboard, the example Prometheus config and docs/metrics.md agree with
//! what the exporter actually serves.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::export::*;
use gpumon::export::{Exporter, Format};
use gpumon::model::alerts::{Alert, AlertKind, Evidence, Severity};

fn root(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// Every sample name the fixture (with an alert) produces.
fn served_names() -> BTreeSet<String> {
    let ex = Exporter::new("h".into());
    ex.publish(&state_of(&two_gpu_frames()));
    let alert = Alert {
        kind: AlertKind::Growth,
        severity: Severity::Warning,
        pid: Some(4242),
        gpu: 0,
        message: String::new(),
        summary: String::new(),
        evidence: Evidence::default(),
        raised_at: T0,
        raised_epoch: None,
        updated_at: T0,
        cleared_at: None,
        silenced: false,
    };
    ex.publish_alerts(&[&alert]);
    let mut names: BTreeSet<String> = ex
        .render(Format::Prometheus)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string))
        .collect();
    // The fixture's alert makes no forecast; the name is still served when one does.
    names.insert("gpumon_alert_exhaustion_seconds".into());
    names
}

fn gpumon_identifiers(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("gpumon_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn dashboard_queries_only_served_metrics() {
    let text = std::fs::read_to_string(root("assets/grafana-dashboard.json")).expect("dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let served = served_names();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(exprs.len() > 20, "found {} queries", exprs.len());
    for e in &exprs {
        for name in gpumon_identifiers(e) {
            assert!(
                served.contains(&name),
                "dashboard uses {name}, not served: {e}"
            );
        }
    }
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The `kind` label's values, as docs/metrics.md lists them: every alert kind, by its wire
/// name (a new rule's kind is easy to leave out of the sentence).
#[test]
fn every_alert_kind_is_in_the_kind_label_sentence() {
    let docs = std::fs::read_to_string(root("docs/metrics.md")).expect("docs/metrics.md");
    let at = docs.find("`kind` is one of").expect("the kind sentence");
    let sentence = &docs[at..at + docs[at..].find(". ").expect("sentence end")];
    for kind in gpumon::model::alerts::AlertKind::ALL {
        let wire = serde_json::to_value(kind).expect("kind serializes");
        let wire = wire.as_str().expect("a string");
        assert!(
            sentence.contains(&format!("`{wire}`")),
            "docs/metrics.md's kind sentence lacks `{wire}`: {sentence}"
        );
    }
}

#[test]
fn every_served_metric_is_documented() {
    let docs = std::fs::read_to_string(root("docs/metrics.md")).expect("docs/metrics.md");
    let documented = gpumon_identifiers(&docs);
    for name in served_names() {
        assert!(
            documented.contains(&name),
            "{name} is not in docs/metrics.md"
        );
    }
    let served = served_names();
    for name in documented {
        // OpenMetrics calls an info family by its name without `_info`.
        assert!(
            served.contains(&name) || served.contains(&format!("{name}_info")),
            "docs/metrics.md names {name}, which is not served"
        );
    }
}

#[test]
fn example_prometheus_config_is_valid() {
    let out = Command::new("promtool")
        .args(["check", "config", &root("assets/prometheus.yml")])
        .output();
    match out {
        Ok(out) => assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            assert!(
                std::env::var("GPUMON_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
                "promtool is required but cannot run: {e}"
            );
            eprintln!("skipping: promtool not installed ({e})");
        }
    }
}

/// docs/metrics.md's paragraph on misbehaving clients states the endpoint's real limits.
#[test]
fn the_documented_http_limits_are_the_code_s() {
    let docs = std::fs::read_to_string(root("docs/metrics.md")).expect("docs/metrics.md");
    let docs = docs.split_whitespace().collect::<Vec<_>>().join(" ");
    let l = gpumon::export::http::Limits::default();
    for said in [
        format!("head within {} s", l.header_read_timeout.as_secs()),
        format!("completes no request for {} s", l.request_timeout.as_secs()),
        format!("At most {} connections", l.max_connections),
        format!(
            "closed after {} minutes",
            l.max_connection_age.as_secs() / 60
        ),
        format!("over {} KiB 431", l.max_header_bytes / 1024),
    ] {
        assert!(docs.contains(&said), "docs/metrics.md should say '{said}'");
    }
}
