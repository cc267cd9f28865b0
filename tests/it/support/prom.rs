//! A real Prometheus for the tests that need one: started on a free port, scraping the
//! given targets every second, killed when dropped. Skips (with a notice) when
//! `prometheus` is not installed, unless GPUMON_REQUIRE_PROMETHEUS=1 (CI) makes that a
//! failure.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn available() -> bool {
    let found = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("GPUMON_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "GPUMON_REQUIRE_PROMETHEUS=1 but `prometheus` cannot run"
        );
        eprintln!("skipping: `prometheus` is not installed (apt-get install prometheus)");
    }
    found
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Prometheus scraping `targets` every second as job `gpumon`; its data and log in `dir`.
pub fn start(dir: &Path, targets: &[SocketAddr]) -> (KillOnDrop, SocketAddr) {
    let config = dir.join("prometheus.yml");
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: gpumon\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        ),
    )
    .expect("config written");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("valid address");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    (KillOnDrop(child), addr)
}

/// An instant query's result (empty while Prometheus is not up yet).
pub fn query(prom: SocketAddr, expr: &str) -> Vec<Value> {
    let Ok(resp) = ureq::get(&format!("http://{prom}/api/v1/query"))
        .query("query", expr)
        .call()
    else {
        return vec![];
    };
    let body: Value = resp
        .into_body()
        .read_to_string()
        .ok()
        .and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or(Value::Null);
    body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
