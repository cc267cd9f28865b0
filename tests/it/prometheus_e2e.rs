//! A real Prometheus scrapes gpumon and the values it stored are checked
//! against the frames gpumon was fed. Skips (with a notice) when `prometheus`
//! is not installed, unless GPUMON_REQUIRE_PROMETHEUS=1 (CI) makes that a failure.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::export::*;
use crate::support::prom::{self, KillOnDrop, free_port, query};
use gpumon::model::frame::Frame;
use gpumon::model::state::State;
use gpumon::record::{Next, Reader};
use serde_json::Value;

fn prometheus_available() -> bool {
    prom::available()
}

fn replay(path: &Path) -> State {
    let mut reader = Reader::open(path).expect("recording opens");
    let mut state = State::default();
    state.apply(&Frame::Header(reader.header.clone()));
    while let Next::Frame(f) = reader.next().expect("recording reads") {
        state.apply(&f);
    }
    assert_eq!(state.ticks, 3, "the whole recording was read");
    state
}

fn start_prometheus(dir: &Path, target: SocketAddr) -> (KillOnDrop, SocketAddr) {
    prom::start(dir, &[target])
}

fn value(r: &Value) -> f64 {
    r["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

fn only(prom: SocketAddr, expr: &str) -> Value {
    let rs = query(prom, expr);
    assert_eq!(rs.len(), 1, "{expr} -> {rs:?}");
    rs[0].clone()
}

#[test]
fn prometheus_scrapes_the_values_of_the_recording() {
    if !prometheus_available() {
        return;
    }
    // Through a recording on disk, served by the real `gpumon serve --replay`.
    let dir = tempfile::tempdir().expect("temp dir");
    let recording = dir.path().join("fixture.gpumon.jsonl");
    let lines: Vec<String> = two_gpu_frames()
        .iter()
        .map(|f| serde_json::to_string(f).expect("frames serialise"))
        .collect();
    std::fs::write(&recording, lines.join("\n") + "\n").expect("recording written");
    // The model built from the file is what the served values must equal.
    let _ = replay(&recording);
    let target: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let _gpumon = KillOnDrop(
        Command::new(assert_cmd::cargo::cargo_bin("gpumon"))
            .args(["serve", "--listen", &target.to_string(), "--replay"])
            .arg(&recording)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gpumon serve starts"),
    );
    let up = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(target).is_err() {
        assert!(
            Instant::now() < up,
            "gpumon serve never listened on {target}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let (_prom, prom) = start_prometheus(dir.path(), target);

    let deadline = Instant::now() + Duration::from_secs(90);
    while query(prom, "gpumon_up").is_empty() {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped gpumon; its log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    assert_eq!(value(&only(prom, "up{job=\"gpumon\"}")), 1.0);
    assert_eq!(value(&only(prom, "gpumon_up")), 1.0);
    assert_eq!(value(&only(prom, "gpumon_samples_total")), 3.0);
    let used = only(prom, "gpumon_gpu_memory_used_bytes");
    assert_eq!(value(&used), (45 * GIB) as f64);
    let m = &used["metric"];
    assert_eq!(m["gpu"], "0");
    assert_eq!(m["hostname"], "node-a");
    assert_eq!(m["uuid"], gpu_info(0).uuid);
    assert_eq!(m["pci_bus_id"], gpu_info(0).pci_bus_id);
    assert_eq!(value(&only(prom, "gpumon_gpu_up{gpu=\"1\"}")), 0.0);
    assert_eq!(value(&only(prom, "gpumon_gpu_power_watts")), 612.345);
    assert_eq!(value(&only(prom, "gpumon_gpu_utilization_ratio")), 0.87);
    assert_eq!(
        value(&only(prom, "gpumon_gpu_memory_peak_used_bytes{gpu=\"1\"}")),
        (12 * GIB) as f64
    );

    // The escaped process name arrives intact through the server's parser.
    let p = only(prom, "gpumon_process_gpu_memory_used_bytes");
    assert_eq!(p["metric"]["pid"], "4242");
    assert_eq!(p["metric"]["user"], "alice");
    assert_eq!(p["metric"]["process"], "train \"big\" \\ model\nv2");
    assert_eq!(value(&p), (32 * GIB) as f64);
    assert_eq!(
        query(prom, "gpumon_process_gpu_memory_peak_bytes").len(),
        2,
        "peaks of 4242 on GPU 0 and 5151 on GPU 1"
    );

    assert_eq!(
        value(&only(prom, "gpumon_allocator_fragmentation_ratio")),
        0.75
    );
    assert_eq!(value(&only(prom, "gpumon_allocator_ooms_total")), 1.0);
    assert_eq!(
        value(&only(
            prom,
            "gpumon_allocator_free_block_class_blocks{size_min_bytes=\"1048576\"}"
        )),
        3.0
    );
    assert_eq!(value(&only(prom, "gpumon_allocator_epoch")), 3.0);

    // Every dashboard query is valid PromQL, and the NVML panels have data.
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/assets/grafana-dashboard.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("dashboard readable"),
    )
    .expect("dashboard is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    let mut with_data = 0;
    for e in &exprs {
        let e = e.replace("$hostname", ".*").replace("$gpu", ".*");
        let body: Value = ureq::get(&format!("http://{prom}/api/v1/query"))
            .query("query", &e)
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .expect("query API answers")
            .into_body()
            .read_to_string()
            .ok()
            .and_then(|b| serde_json::from_str(&b).ok())
            .unwrap_or(Value::Null);
        assert_eq!(body["status"], "success", "{e}: {body}");
        if body["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            with_data += 1;
        }
    }
    assert!(
        with_data * 10 >= exprs.len() * 8,
        "only {with_data} of {} dashboard queries have data",
        exprs.len()
    );

    // Prometheus asks for OpenMetrics first; the `info` type proves it got it.
    let meta: Value = ureq::get(&format!("http://{prom}/api/v1/targets/metadata"))
        .query("metric", "gpumon_gpu")
        .call()
        .expect("metadata API answers")
        .into_body()
        .read_to_string()
        .ok()
        .and_then(|b| serde_json::from_str(&b).ok())
        .expect("JSON");
    assert_eq!(meta["data"][0]["type"], "info", "{meta}");
}
