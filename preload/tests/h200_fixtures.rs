//! Replays what the interposer sent on an H200 (scripts/gpu/preload_check.sh,
//! driver 580.159.04, CUDA 13.0, PyTorch 2.11, JAX 0.11.2, CuPy 14.2) through
//! gpumon's own decoder, and holds the recorded comparison to its claims:
//! driver-level bytes equal the frameworks' own where they can.

use std::path::PathBuf;

use gpumon::wire::{Decoded, Framework, Message, Role, decode_line};
use serde_json::Value;

const WORKLOADS: [&str; 6] = [
    "cuda_c",
    "torch_native",
    "torch_expandable",
    "torch_async",
    "jax",
    "cupy",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200")
}

fn lines(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir().join(name)).expect("fixture");
    text.lines().map(str::to_string).collect()
}

#[test]
fn gpumon_decodes_every_interposer_message() {
    for w in WORKLOADS {
        let mut types = Vec::new();
        for l in lines(&format!("{w}.jsonl")) {
            match decode_line(l.as_bytes()) {
                Ok(Decoded::Msg(m)) => types.push(m.type_name()),
                other => panic!("{w}: {other:?} for {l}"),
            }
        }
        assert_eq!(types.first(), Some(&"hello"), "{w}");
        assert_eq!(types.get(1), Some(&"history"), "{w}");
        assert_eq!(types.last(), Some(&"bye"), "{w}");
        assert!(
            types.contains(&"sample") && types.contains(&"alloc"),
            "{w}: {types:?}"
        );
        let first = lines(&format!("{w}.jsonl")).remove(0);
        let Ok(Decoded::Msg(m)) = decode_line(first.as_bytes()) else {
            panic!("{w}")
        };
        let Message::Hello(h) = *m else {
            panic!("{w}: not a hello")
        };
        assert_eq!(h.role, Role::Interposer);
        assert_eq!(h.framework, Some(Framework::CudaDriver));
        assert_eq!(h.allocator.as_deref(), Some("driver"));
        assert_eq!(
            h.devices.first().and_then(|d| d.name.as_deref()),
            Some("NVIDIA H200")
        );
    }
}

fn results() -> Vec<Value> {
    lines("results.jsonl")
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn num(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or(i64::MIN)
}

#[test]
fn driver_bytes_match_the_frameworks_where_they_can() {
    let rs = results();
    assert_eq!(rs.len(), 4 + 3 * 3 + 2 + 2, "one row per CHECK");
    for r in &rs {
        let (own, drv) = (&r["own"], &r["driver"]);
        let w = r["workload"].as_str().unwrap_or("");
        let ctx = format!("{w} {}", r["phase"]);
        match w {
            // The C program's own sums and peak, exactly.
            "cuda_c" => {
                assert_eq!(num(drv, "allocated"), num(own, "allocated"), "{ctx}");
                assert_eq!(
                    num(drv, "peak_allocated"),
                    num(own, "peak_allocated"),
                    "{ctx}"
                );
            }
            // Caching allocators: the segments the driver saw are `memory_reserved()`.
            "torch_native" | "torch_expandable" => {
                assert_eq!(num(drv, "reserved"), num(own, "reserved"), "{ctx}");
                assert_eq!(
                    num(drv, "peak_reserved"),
                    num(own, "peak_reserved"),
                    "{ctx}"
                );
            }
            // cudaMallocAsync: every tensor is a driver allocation; the pool is reserved.
            "torch_async" => {
                assert_eq!(num(drv, "allocated"), num(own, "allocated"), "{ctx}");
                assert_eq!(
                    num(drv, "peak_allocated"),
                    num(own, "peak_allocated"),
                    "{ctx}"
                );
                assert_eq!(num(drv, "pool_reserved"), num(own, "reserved"), "{ctx}");
                assert_eq!(
                    num(drv, "peak_reserved"),
                    num(own, "peak_reserved"),
                    "{ctx}"
                );
            }
            // XLA's BFC pool is cuMemCreate'd; four small cuMemAllocs (2 × 4 B and
            // 2 × 25,344 B) live outside it.
            "jax" => assert_eq!(num(drv, "reserved"), num(own, "reserved") + 50_696, "{ctx}"),
            "cupy" => {
                assert_eq!(num(drv, "reserved"), num(own, "reserved"), "{ctx}");
                assert_eq!(num(drv, "allocated"), num(own, "reserved"), "{ctx}");
            }
            other => panic!("unexpected workload {other}"),
        }
    }
}
