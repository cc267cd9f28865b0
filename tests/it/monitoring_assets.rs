//! `gpumon dashboard`: the Grafana dashboard, the scrape example and the alerting rules come
//! out of the binary byte for byte as assets/ holds them (an installed gpumon has no tree),
//! and docs/metrics.md shows the rules the binary ships.

use std::path::Path;
use std::process::Command;

use crate::support::gpumon;

fn asset(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(name),
    )
    .expect("asset")
}

fn printed(args: &[&str]) -> Vec<u8> {
    let out = gpumon().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_printed_dashboard_is_the_asset_and_is_json() {
    let out = printed(&["dashboard"]);
    assert_eq!(out, asset("grafana-dashboard.json"));
    assert_eq!(printed(&["dashboard", "grafana"]), out);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
    assert!(v["panels"].as_array().is_some_and(|p| p.len() > 10));
}

#[test]
fn the_scrape_example_and_the_rules_print_as_shipped() {
    assert_eq!(
        printed(&["dashboard", "prometheus"]),
        asset("prometheus.yml")
    );
    assert_eq!(
        printed(&["dashboard", "alert-rules"]),
        asset("alert-rules.yml")
    );
}

#[test]
fn write_puts_all_three_in_a_new_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a/b");
    let out = printed(&["dashboard", "--write", dir.to_str().expect("utf-8")]);
    let names = [
        "grafana-dashboard.json",
        "prometheus.yml",
        "alert-rules.yml",
    ];
    let listed: Vec<String> = names
        .iter()
        .map(|n| dir.join(n).display().to_string())
        .collect();
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        listed.join("\n") + "\n"
    );
    for n in names {
        assert_eq!(
            std::fs::read(dir.join(n)).expect("written"),
            asset(n),
            "{n}"
        );
    }
    // A file where the directory should be: an error naming it, not a panic.
    let blocked = tmp.path().join("file");
    std::fs::write(&blocked, "x").expect("write");
    gpumon()
        .args(["dashboard", "--write"])
        .arg(&blocked)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("cannot create"));
}

#[test]
fn docs_show_the_rules_the_binary_ships() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
            .expect("docs");
    let block = docs
        .split("```yaml\ngroups:")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/metrics.md shows the alerting rules");
    let shipped = String::from_utf8(asset("alert-rules.yml")).expect("utf-8");
    assert!(
        shipped.contains(&format!("groups:{block}")),
        "docs/metrics.md's rules differ from assets/alert-rules.yml"
    );
}

#[test]
fn the_alert_rules_pass_promtool() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/alert-rules.yml");
    match Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
    {
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

/// The default port collides with no exporter or service a GPU node commonly runs (the
/// reasons are in docs/metrics.md), and the examples scrape the port gpumon listens on.
#[test]
fn the_default_port_is_nobody_elses_and_the_examples_use_it() {
    let addr: std::net::SocketAddr = gpumon::export::DEFAULT_LISTEN.parse().expect("address");
    let port = addr.port();
    assert!(addr.ip().is_loopback());
    // Prometheus's exporter range (all allocated), and what follows it.
    assert!(
        !(9100..=10999).contains(&port),
        "{port}: an allocated exporter port"
    );
    // Below Linux's ephemeral range.
    assert!(port < 32768, "{port}: ephemeral");
    let taken = [
        3000, 4317, 4318, 6006, 8000, 8001, 8002, 8080, 8265, 8888, 9090, 9093, 9400, 9464, 29500,
    ];
    assert!(
        !taken.contains(&port),
        "{port} is another service's default"
    );
    let scrape = String::from_utf8(asset("prometheus.yml")).expect("utf-8");
    assert!(
        scrape.contains(&format!("gpu-node-01:{port}")),
        "prometheus.yml scrapes {port}"
    );
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
            .expect("docs");
    assert!(docs.contains(&format!("### Why port {port}")));
    assert!(docs.contains(&format!("| default address | `127.0.0.1:{port}`")));
}
