//! The interposer's protocol messages, built as JSON lines (docs/protocol.md;
//! interposer specifics in docs/interposer.md).

use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};

use crate::clock::now_ms;
use crate::devices::{DEVICES, HOST};
use crate::protocol::{MAX_MESSAGE_LINE, VERSION};
use crate::ring::Event;
use crate::table::Kind;

/// `alloc` ops per message: about 100 bytes each keeps a batch far below the limit.
pub const OPS_PER_MESSAGE: usize = 400;
pub const SAMPLE_HZ: f64 = 2.0;

/// Facts about the process fixed at reporter start.
#[derive(Debug, Clone, Default)]
pub struct ProcInfo {
    pub pid: u32,
    pub ns_pid: Option<u32>,
    pub started: i64,
    pub cmdline: Option<String>,
    pub env: Vec<(String, String)>,
    pub devices: Vec<Value>,
    pub driver_version: Option<String>,
}

/// Environment variables that describe allocator policy, passed on as `settings`.
pub const SETTINGS_VARS: [&str; 9] = [
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "CUDA_MODULE_LOADING",
    "CUPY_GPU_MEMORY_LIMIT",
];

fn env_of<'a>(info: &'a ProcInfo, key: &str) -> Option<&'a str> {
    info.env
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn env_u32(info: &ProcInfo, keys: &[&str]) -> Option<u32> {
    keys.iter()
        .find_map(|k| env_of(info, k).and_then(|v| v.trim().parse().ok()))
}

pub fn hello(info: &ProcInfo) -> Value {
    let settings: Map<String, Value> = SETTINGS_VARS
        .iter()
        .filter_map(|k| env_of(info, k).map(|v| ((*k).to_string(), json!(v))))
        .collect();
    json!({
        "v": VERSION,
        "type": "hello",
        "role": "interposer",
        "pid": info.pid,
        "ns_pid": info.ns_pid,
        "framework": "cuda-driver",
        "framework_version": info.driver_version,
        "allocator": "driver",
        "settings": settings,
        "policy": "driver-level view: every device allocation, free and pool reserve the program makes through libcuda; framework caches appear as the segments they reserve",
        "devices": info.devices,
        "cuda_visible_devices": env_of(info, "CUDA_VISIBLE_DEVICES"),
        "cuda_device_order": env_of(info, "CUDA_DEVICE_ORDER"),
        "rank": env_u32(info, &["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"]),
        "local_rank": env_u32(info, &["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"]),
        "world_size": env_u32(info, &["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]),
        "cmdline": info.cmdline,
        "capabilities": ["stats", "peaks", "allocations"],
        "sample_hz": SAMPLE_HZ,
        "snapshot_s": null,
        "started": info.started,
        "na": {
            "free_blocks": "the driver sees segments and pages, not the blocks inside a framework's cache",
        },
    })
}

/// One device's counters as a `sample`; `dropped` is per connection.
pub fn sample(dev: usize, t: i64, cost_us: u64, dropped: u64) -> Value {
    let d = &DEVICES[dev];
    let pooled = d.used_pools.load(Ordering::Relaxed);
    json!({
        "v": VERSION,
        "type": "sample",
        "t": t,
        "dev": dev,
        "allocated": d.live.load(Ordering::Relaxed),
        "reserved": d.reserved(),
        "peak_allocated": d.peak_live.load(Ordering::Relaxed),
        "peak_reserved": d.peak_reserved.load(Ordering::Relaxed),
        "largest_alloc": d.largest.load(Ordering::Relaxed),
        "cost_us": cost_us,
        "dropped": dropped,
        "live_count": d.live_count.load(Ordering::Relaxed),
        "pool_reserved": pooled.then(|| d.pool_reserved.load(Ordering::Relaxed)),
        "pool_reserved_high": pooled.then(|| d.pool_reserved_high.load(Ordering::Relaxed)),
        "host_pinned": HOST.live.load(Ordering::Relaxed),
        "host_pinned_peak": HOST.peak.load(Ordering::Relaxed),
        "host_pinned_count": HOST.count.load(Ordering::Relaxed),
        "na": {
            "active": "driver-level: no allocator blocks",
            "requested": "driver-level: no allocator blocks",
            "limit": "driver-level: no per-process limit",
        },
    })
}

fn op_json(e: &Event) -> Value {
    let op = if e.op == b'-' { "-" } else { "+" };
    let stream = (e.stream != 0).then_some(e.stream);
    json!([
        e.t_us,
        op,
        e.addr,
        e.size,
        Kind::from_u8(e.kind).name(),
        stream
    ])
}

/// One `alloc` batch for a device. `snapshot` marks the live table sent on
/// connect (an additive field): those ops are allocations alive at that moment.
pub fn alloc(dev: usize, t: i64, ops: &[Event], snapshot: bool) -> Value {
    let d = &DEVICES[dev];
    let hist: Vec<Value> = d.hist.snapshot().iter().map(|b| json!(b)).collect();
    let mut v = json!({
        "v": VERSION,
        "type": "alloc",
        "t": t,
        "dev": dev,
        "ops": ops.iter().map(op_json).collect::<Vec<_>>(),
        "live_bytes": d.live.load(Ordering::Relaxed),
        "peak_bytes": d.peak_live.load(Ordering::Relaxed),
        "pool_reserved": d.used_pools.load(Ordering::Relaxed).then(|| d.pool_reserved.load(Ordering::Relaxed)),
        "hist": hist,
    });
    if snapshot {
        v["snapshot"] = json!(true);
    }
    v
}

/// `history` in parts that each fit the line limit; the last has `done: true`.
pub fn history(samples: &[Value], t: i64) -> Vec<String> {
    let budget = MAX_MESSAGE_LINE - 1_024;
    let mut parts: Vec<Vec<&Value>> = vec![Vec::new()];
    let mut size = 0usize;
    for s in samples {
        let n = s.to_string().len() + 1;
        if size + n > budget && parts.last().is_some_and(|p| !p.is_empty()) {
            parts.push(Vec::new());
            size = 0;
        }
        size += n;
        if let Some(p) = parts.last_mut() {
            p.push(s);
        }
    }
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            line(&json!({
                "v": VERSION,
                "type": "history",
                "t": t,
                "epochs": [],
                "samples": p,
                "markers": [],
                "events": [],
                "frag": [],
                "done": i == last,
            }))
        })
        .collect()
}

pub fn bye(reason: &str) -> Value {
    json!({ "v": VERSION, "type": "bye", "t": now_ms(), "reason": reason })
}

pub fn version_error(min_v: u64, max_v: u64) -> Value {
    json!({
        "v": VERSION,
        "type": "error",
        "code": "version",
        "text": format!("interposer speaks v{VERSION}, monitor wants v{min_v}..v{max_v}"),
    })
}

pub fn line(v: &Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// The monitor's hello: `Ok(())` when v1 is in its range, `Err(Some(range))`
/// for a version mismatch, `Err(None)` for anything that is not a monitor hello.
pub fn check_monitor_hello(text: &str) -> Result<(), Option<(u64, u64)>> {
    let v: Value = serde_json::from_str(text.trim_end()).map_err(|_| None)?;
    if v.get("type").and_then(Value::as_str) != Some("hello") {
        return Err(None);
    }
    let version = u64::from(VERSION);
    let own = v.get("v").and_then(Value::as_u64).unwrap_or(version);
    let min_v = v.get("min_v").and_then(Value::as_u64).unwrap_or(own);
    let max_v = v.get("max_v").and_then(Value::as_u64).unwrap_or(own);
    if min_v <= version && version <= max_v {
        Ok(())
    } else {
        Err(Some((min_v, max_v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_hello_is_checked() {
        let ok = r#"{"v":1,"type":"hello","role":"monitor","min_v":1,"max_v":1,"client":"gpumon 0.1.0"}"#;
        assert_eq!(check_monitor_hello(ok), Ok(()));
        let newer = r#"{"v":2,"type":"hello","min_v":2,"max_v":3}"#;
        assert_eq!(check_monitor_hello(newer), Err(Some((2, 3))));
        assert_eq!(check_monitor_hello(r#"{"type":"sample"}"#), Err(None));
        assert_eq!(check_monitor_hello("not json"), Err(None));
        let e = version_error(2, 3);
        assert_eq!(e["code"], "version");
    }

    /// The other half of gpumon's `wire::cross_language` check, run against the monitor's own
    /// code: the interposer accepts the hello gpumon sends, and gpumon decodes every kind of
    /// message the interposer builds.
    #[test]
    fn the_monitor_and_the_interposer_understand_each_other() {
        use gpumon::wire::{Decoded, decode_line, monitor_hello};
        assert_eq!(check_monitor_hello(&monitor_hello()), Ok(()));
        let mut built: Vec<String> = [
            hello(&ProcInfo::default()),
            sample(0, 1, 2, 0),
            alloc(0, 1, &[Event::default()], true),
            bye("exit"),
            version_error(2, 3),
        ]
        .iter()
        .map(line)
        .collect();
        built.extend(history(&[sample(0, 1, 2, 0)], 1));
        for l in &built {
            match decode_line(l.as_bytes()) {
                Ok(Decoded::Msg(_)) => {}
                other => panic!("gpumon does not take {l}: {other:?}"),
            }
        }
    }

    #[test]
    fn history_splits_under_the_line_limit() {
        let samples: Vec<Value> = (0..2_000).map(|i| sample(i % 3, i as i64, 1, 0)).collect();
        let parts = history(&samples, 5);
        assert!(parts.len() > 1);
        let mut total = 0;
        for (i, p) in parts.iter().enumerate() {
            assert!(p.len() <= MAX_MESSAGE_LINE, "{}", p.len());
            let v: Value = serde_json::from_str(p).expect("json");
            assert_eq!(v["done"], json!(i == parts.len() - 1));
            total += v["samples"].as_array().map_or(0, |a| a.len());
        }
        assert_eq!(total, 2_000);
        let empty = history(&[], 5);
        assert_eq!(empty.len(), 1);
    }

    #[test]
    fn alloc_batches_fit_the_line_limit_and_carry_ops() {
        let ops: Vec<Event> = (0..OPS_PER_MESSAGE as u64)
            .map(|i| Event {
                t_us: u64::MAX,
                addr: u64::MAX - i,
                size: u64::MAX,
                stream: u64::MAX,
                dev: 0,
                op: b'-',
                kind: Kind::HostAlloc as u8,
            })
            .collect();
        let l = line(&alloc(63, i64::MAX, &ops, true));
        assert!(l.len() < MAX_MESSAGE_LINE, "{}", l.len());
        let v: Value = serde_json::from_str(&l).expect("json");
        assert_eq!(v["ops"][0][1], "-");
        assert_eq!(v["ops"][0][4], "host_alloc");
        assert_eq!(v["snapshot"], true);
        let plain = alloc(
            0,
            1,
            &[Event {
                op: b'+',
                ..Event::default()
            }],
            false,
        );
        assert_eq!(plain["ops"][0][5], Value::Null);
        assert!(plain.get("snapshot").is_none());
    }

    #[test]
    fn hello_names_the_interposer() {
        let info = ProcInfo {
            pid: 7,
            env: vec![
                (
                    "PYTORCH_CUDA_ALLOC_CONF".into(),
                    "expandable_segments:True".into(),
                ),
                ("LOCAL_RANK".into(), "3".into()),
            ],
            ..ProcInfo::default()
        };
        let h = hello(&info);
        assert_eq!(h["role"], "interposer");
        assert_eq!(h["framework"], "cuda-driver");
        assert_eq!(h["allocator"], "driver");
        assert_eq!(
            h["settings"]["PYTORCH_CUDA_ALLOC_CONF"],
            "expandable_segments:True"
        );
        assert_eq!(h["local_rank"], 3);
        assert_eq!(h["rank"], Value::Null);
    }
}
