//! Builds an 8-GPU recording from real ones: there is no 8-GPU recording, so the GPU
//! streams of several real H200 recordings are put side by side as if one host had them
//! all. Each source keeps its own data; what changes is only what must, for them to live
//! on one host: GPU indices (renumbered), UUIDs and PCI bus ids (made unique per source),
//! PIDs (offset per source), and times (every source starts with the first). Ticks are
//! merged onto one clock; a source that has ended holds its last sample.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One source: a recording under `tests/` and how many of its GPUs to take (from index 0).
pub struct Source {
    pub path: &'static str,
    pub gpus: usize,
}

/// The real recordings that make up the 8 GPUs: two 2-GPU companion runs, the
/// CUDA_VISIBLE_DEVICES run, a grow/shrink run and an idle card.
pub const EIGHT: [Source; 5] = [
    Source {
        path: "corpus/corpus_leak.jsonl",
        gpus: 2,
    },
    Source {
        path: "fixtures/h200x2_cvd.jsonl",
        gpus: 2,
    },
    Source {
        path: "fixtures/h200_torch_companion.jsonl",
        gpus: 2,
    },
    Source {
        path: "fixtures/h200_torch_grow_shrink.jsonl",
        gpus: 1,
    },
    Source {
        path: "fixtures/h200_idle.jsonl",
        gpus: 1,
    },
];

const PID_STRIDE: u64 = 100_000;

fn read(path: &str) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(path);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Millisecond Unix times of this decade; byte counts and PIDs are far from this range.
fn is_time(v: u64) -> bool {
    (1_600_000_000_000..2_100_000_000_000).contains(&v)
}

/// Shift every timestamp by `dt` and every `pid` by `dp`, anywhere in the frame, and
/// renumber GPU indices in CUDA_VISIBLE_DEVICES with `map` (old NVML index -> new).
fn rewrite(v: &mut Value, dt: i64, dp: u64, map: &[(u64, u64)]) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "pid" {
                    if let Some(p) = x.as_u64() {
                        *x = Value::from(p + dp);
                        continue;
                    }
                }
                if k == "cuda_visible_devices" {
                    if let Some(list) = x.as_str() {
                        let renumbered: Vec<String> = list
                            .split(',')
                            .map(|d| match d.trim().parse::<u64>() {
                                Ok(i) => map
                                    .iter()
                                    .find(|(o, _)| *o == i)
                                    .map_or(d.to_string(), |(_, n)| n.to_string()),
                                Err(_) => d.to_string(),
                            })
                            .collect();
                        *x = Value::from(renumbered.join(","));
                        continue;
                    }
                }
                rewrite(x, dt, dp, map);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite(x, dt, dp, map)),
        Value::Number(n) => {
            if let Some(t) = n.as_u64().filter(|&t| is_time(t)) {
                *v = Value::from((t as i64 + dt) as u64);
            }
        }
        _ => {}
    }
}

/// The combined recording as JSON lines, header first, frames in time order.
pub fn combine(sources: &[Source], interval_ms: i64) -> Vec<String> {
    let mut header_gpus = Vec::new();
    let mut others: Vec<(i64, usize, Value)> = Vec::new();
    // Per source: (ticks with shifted times, index map old -> new).
    let mut ticks: Vec<Vec<(i64, Value)>> = Vec::new();
    let mut maps: Vec<Vec<(u64, u64)>> = Vec::new();
    let mut t0 = None;
    let mut end = 0i64;
    let mut seq = 0usize;
    for (k, src) in sources.iter().enumerate() {
        let mut lines = read(src.path);
        let header: Value = serde_json::from_str(&lines[0]).expect("header");
        let start = header["started"].as_i64().expect("started");
        let t0 = *t0.get_or_insert(start);
        let dt = t0 - start;
        // Unique UUIDs and bus ids per source, replaced in every line (header, hello
        // devices, CUDA_VISIBLE_DEVICES) so companions still find their GPU.
        let gpus = header["gpus"].as_array().expect("gpus").clone();
        for g in &gpus {
            let uuid = g["uuid"].as_str().unwrap_or_default().to_string();
            let bus = g["pci_bus_id"].as_str().unwrap_or_default().to_string();
            let new_uuid = format!("{}{:02x}", &uuid[..uuid.len() - 2], 0x10 * k + 1);
            let new_bus = bus.replacen(":00:", &format!(":{:02x}:", 0x10 * k), 1);
            for l in lines.iter_mut() {
                *l = l.replace(&uuid, &new_uuid).replace(&bus, &new_bus);
            }
        }
        let header: Value = serde_json::from_str(&lines[0]).expect("header");
        let mut map = Vec::new();
        for g in header["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .take(src.gpus)
        {
            let mut g = g.clone();
            map.push((
                g["index"].as_u64().expect("index"),
                header_gpus.len() as u64,
            ));
            g["index"] = Value::from(header_gpus.len() as u64);
            header_gpus.push(g);
        }
        let dp = PID_STRIDE * k as u64;
        let mut src_ticks = Vec::new();
        for l in &lines[1..] {
            let mut v: Value = serde_json::from_str(l).expect("frame");
            rewrite(&mut v, dt, dp, &map);
            let t = v["t"].as_i64().unwrap_or(t0);
            end = end.max(t);
            match v["type"].as_str() {
                Some("tick") => src_ticks.push((t, v)),
                // Alerts are derived again from the data by whoever replays this.
                Some("alert") => {}
                _ => {
                    others.push((t, seq, v));
                    seq += 1;
                }
            }
        }
        ticks.push(src_ticks);
        maps.push(map);
    }
    let t0 = t0.expect("at least one source");
    let mut header: Value = serde_json::from_str(&read(sources[0].path)[0]).expect("header");
    header["gpus"] = Value::from(header_gpus);
    header["interval_ms"] = Value::from(interval_ms);
    header["host"] = Value::from("combined-8x");
    let mut frames: Vec<(i64, usize, Value)> = others;
    let mut t = t0;
    while t <= end {
        let mut gpus = Vec::new();
        for (src_ticks, map) in ticks.iter().zip(&maps) {
            let Some((_, tick)) = src_ticks.iter().rev().find(|(st, _)| *st <= t) else {
                continue;
            };
            for g in tick["gpus"].as_array().expect("gpus") {
                let old = g["index"].as_u64().expect("index");
                if let Some((_, new)) = map.iter().find(|(o, _)| *o == old) {
                    let mut g = g.clone();
                    g["index"] = Value::from(*new);
                    gpus.push(g);
                }
            }
        }
        gpus.sort_by_key(|g| g["index"].as_u64());
        let tick = serde_json::json!({"type": "tick", "t": t, "gpus": gpus});
        frames.push((t, seq, tick));
        seq += 1;
        t += interval_ms;
    }
    frames.sort_by_key(|(t, s, _)| (*t, *s));
    std::iter::once(header.to_string())
        .chain(frames.into_iter().map(|(_, _, v)| v.to_string()))
        .collect()
}

/// The 8-GPU recording written once per test process under the target directory.
pub fn eight_gpu_file() -> PathBuf {
    static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FILE.get_or_init(write_eight).clone()
}

fn write_eight() -> PathBuf {
    // One directory per test process (test binaries run in parallel); a fixed file name,
    // since the screen shows it.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-recordings")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).expect("target dir");
    let path = dir.join("h200x8_combined.jsonl");
    let mut text = combine(&EIGHT, 500).join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write combined recording");
    path
}
