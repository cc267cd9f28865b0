//! The cluster view end to end: three `gpumon serve --replay` exporters named as nodes
//! (`--node`), each playing a different real H200 recording, scraped by a real Prometheus;
//! `gpumon --prometheus` in a real terminal lists the three nodes, the worst first, shows
//! the one node's alert in the bar, opens that node to its GPU card and processes, goes back,
//! and marks a node stale (with its age) once its exporter stops.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::prom::{self, KillOnDrop};
use crate::tmux_e2e::{have_tmux, keys, literal, pane, start_cmd, wait_for};

fn exporter(recording: &str, node: &str) -> (KillOnDrop, SocketAddr) {
    let addr: SocketAddr = format!("127.0.0.1:{}", prom::free_port())
        .parse()
        .expect("addr");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(recording);
    let child = Command::new(assert_cmd::cargo::cargo_bin("gpumon"))
        .args([
            "serve",
            "--node",
            node,
            "--listen",
            &addr.to_string(),
            "--replay",
        ])
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpumon serve starts");
    (KillOnDrop(child), addr)
}

#[test]
fn nodes_from_prometheus_open_to_their_gpus_and_go_stale_when_their_exporter_stops() {
    if !have_tmux() || !prom::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let alpha = exporter("assets/demo.gpumon.jsonl.gz", "alpha");
    let mut bravo = exporter("assets/demo-leaks.gpumon.jsonl.gz", "bravo");
    // Ends with two ranks' alerts active (growth and divergent rank on PID 545).
    let charlie = exporter("tests/corpus_jobs/spawn_live.gpumon.jsonl.gz", "charlie");
    let (_prom, at) = prom::start(dir.path(), &[alpha.1, bravo.1, charlie.1]);
    let deadline = Instant::now() + Duration::from_secs(90);
    while prom::query(at, "gpumon_alert").is_empty() || prom::query(at, "gpumon_up").len() < 3 {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped the three exporters; its log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} --prometheus http://{at} --prometheus-refresh 1s; sleep 60",
        assert_cmd::cargo::cargo_bin("gpumon").display()
    );
    let s = start_cmd("fleet", 100, 30, &cmd);
    let list = wait_for(&s, "charlie", 30);
    let rows: Vec<&str> = list.lines().collect();
    let row_of = |name: &str| rows.iter().position(|l| l.starts_with(name));
    let (a, b, c) = (row_of("alpha"), row_of("bravo"), row_of("charlie"));
    assert!(
        a.is_some() && b.is_some() && c.is_some(),
        "three nodes listed:\n{list}"
    );
    assert!(c < a && c < b, "the node with alerts comes first:\n{list}");
    assert!(list.contains("3 nodes"), "the summary counts them:\n{list}");
    let bar = rows[rows.len() - 2];
    assert!(
        bar.starts_with("charlie:") && bar.contains("PID 545"),
        "the bar names the node and process of the worst alert:\n{list}"
    );

    // The worst node is selected: Enter opens it to its card and its jobs' ranks.
    keys(&s, &["Enter"]);
    let node = wait_for(&s, "job.py@127.0.0.1:29521", 20);
    assert!(
        node.lines().next().is_some_and(|l| l.contains("charlie")),
        "{node}"
    );
    assert!(node.contains("GPU 0 · H200"), "its GPU card:\n{node}");
    assert!(
        node.contains("growth"),
        "its alerts, adopted, in the bar:\n{node}"
    );
    keys(&s, &["a"]);
    let panel = wait_for(&s, "raised by gpumon on charlie", 10);
    assert!(panel.contains("ssh charlie gpumon"), "{panel}");

    // One key at a time: two Escapes in one write read as Alt+Escape.
    keys(&s, &["Escape"]);
    wait_for(&s, "Esc nodes", 10);
    keys(&s, &["Escape"]);
    wait_for(&s, "ALERT / STATE", 10);
    literal(&s, "/node=al");
    keys(&s, &["Enter"]);
    let picked = wait_for(&s, "1 of 3 nodes", 10);
    assert!(
        !picked.contains("charlie "),
        "only alpha matches:\n{picked}"
    );
    literal(&s, "/");
    keys(&s, &["Escape"]);

    // bravo's exporter stops: Prometheus marks its series stale, gpumon keeps the node with
    // its last values and says how long it has been silent.
    let _ = bravo.0.0.kill();
    let _ = bravo.0.0.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = pane(&s);
        if p.lines()
            .any(|l| l.starts_with("bravo") && l.contains("STALE"))
        {
            assert!(p.contains("1 stale"), "{p}");
            break;
        }
        assert!(Instant::now() < deadline, "bravo never marked stale:\n{p}");
        std::thread::sleep(Duration::from_millis(300));
    }
}
