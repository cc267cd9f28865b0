//! `/metrics` names a Python job by its script (it once read `process="python3"` for every
//! Python job): the real `gpumon serve --replay` of the bundled recording with companions,
//! scraped over HTTP, labels its companions' processes `scenario.py`, as the CSV does
//! (export_flat), never `python3`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of label `name` in a sample line.
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=\"");
    let i = line.find(&key)? + key.len();
    let rest = &line[i..];
    Some(&rest[..rest.find('"')?])
}

/// (pid, process) of every `gpumon_process_gpu_memory_used_bytes` sample.
fn process_labels(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter(|l| l.starts_with("gpumon_process_gpu_memory_used_bytes{"))
        .filter_map(|l| {
            let pid = label(l, "pid")?.parse().ok()?;
            Some((pid, label(l, ",process")?.to_string()))
        })
        .collect()
}

/// The pids whose companion said it runs `python3 .../scenario.py ...` (its hello).
fn scenario_pids(rec: &Path) -> BTreeSet<u32> {
    let text = crate::support::read_text(rec);
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "companion" && v["msg"]["type"] == "hello")
        .filter(|v| {
            v["msg"]["cmdline"]
                .as_str()
                .is_some_and(|c| c.starts_with("python3 ") && c.contains("/scenario.py "))
        })
        .filter_map(|v| v["pid"].as_u64().map(|p| p as u32))
        .collect()
}

#[test]
fn metrics_from_a_recording_with_companions_name_the_script() {
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-companion.gpumon.jsonl.gz");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        // Slow enough to be scraped while its jobs run (they have ended at its end).
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--speed",
            "10",
            "--replay",
        ])
        .arg(&rec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let _child = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("a line");
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("gpumon: serving metrics on http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .parse()
        .expect("an address");
    let scenario = scenario_pids(&rec);
    assert!(
        scenario.len() >= 2,
        "companions running scenario.py: {scenario:?}"
    );
    // Every sample scraped while the recording plays (14 s at --speed 10).
    let mut seen: Vec<(u32, String)> = Vec::new();
    let end = Instant::now() + Duration::from_secs(40);
    while Instant::now() < end {
        let body = ureq::get(&format!("http://{addr}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        seen.extend(process_labels(&body));
        let named = seen.iter().filter(|(p, _)| scenario.contains(p));
        if named.map(|(p, _)| p).collect::<BTreeSet<_>>().len() == scenario.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let of_scenario: Vec<&(u32, String)> =
        seen.iter().filter(|(p, _)| scenario.contains(p)).collect();
    assert!(
        !of_scenario.is_empty(),
        "no scenario.py process was scraped: {seen:?}"
    );
    for (pid, process) in of_scenario {
        assert_eq!(
            process, "scenario.py",
            "pid {pid} runs python3 scenario.py: labelled by its script, not the interpreter"
        );
    }
}
