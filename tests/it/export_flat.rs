//! `--csv` / `--jsonl` flat logs read back the way a user would.

use std::sync::{Arc, Mutex};

use crate::support::export::*;
use gpumon::export::flat::columns;
use gpumon::export::{FlatFormat, FlatLog};
use gpumon::model::frame::Frame;
use gpumon::model::state::State;

/// A `Write` the test can read back after the log is dropped.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Feed frames the way the event loop does: apply, then log the tick.
fn log(format: FlatFormat, frames: &[Frame]) -> String {
    let out = Shared::default();
    let mut log =
        FlatLog::new(Box::new(out.clone()), format, "fallback".into()).expect("header written");
    let mut state = State::default();
    for f in frames {
        state.apply(f);
        if let Frame::Tick(t) = f {
            log.write_tick(&state, t).expect("row written");
        }
    }
    drop(log);
    let bytes = out.0.lock().expect("not poisoned").clone();
    String::from_utf8(bytes).expect("utf-8 log")
}

#[test]
fn csv_has_the_documented_header_and_one_row_per_gpu_and_process() {
    let text = log(FlatFormat::Csv, &two_gpu_frames());
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r
        .headers()
        .expect("header row")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header, columns());
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.expect("valid row")).collect();
    // tick 1: 2 GPUs + 3 processes; tick 2: same; tick 3: 2 GPUs + 2 processes of GPU 0.
    assert_eq!(rows.len(), 5 + 5 + 4);
    let col = |name: &str| {
        columns()
            .iter()
            .position(|c| *c == name)
            .expect("known column")
    };
    let get = |row: &csv::StringRecord, name: &str| row.get(col(name)).unwrap_or("?").to_string();

    let first = &rows[0];
    assert_eq!(get(first, "row"), "gpu");
    assert_eq!(get(first, "time"), "2023-11-14T22:13:21.000Z");
    assert_eq!(get(first, "time_unix_ms"), (T0 + 1_000).to_string());
    assert_eq!(get(first, "hostname"), "node-a");
    assert_eq!(
        get(first, "gpu_uuid"),
        "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"
    );
    assert_eq!(get(first, "memory_used_bytes"), (40 * GIB).to_string());
    assert_eq!(get(first, "power_watts"), "612.345");
    assert_eq!(get(first, "pid"), "");

    // The trainer's name (quotes, backslash, newline) round-trips through CSV quoting.
    let trainer: Vec<_> = rows.iter().filter(|r| get(r, "pid") == "4242").collect();
    assert_eq!(trainer.len(), 3);
    assert_eq!(
        get(trainer[0], "process"),
        "",
        "name unknown before /proc said"
    );
    assert_eq!(get(trainer[1], "process"), "train \"big\" \\ model\nv2");
    assert_eq!(get(trainer[1], "user"), "alice");
    assert_eq!(get(trainer[1], "memory_used_bytes"), (35 * GIB).to_string());
    assert_eq!(get(trainer[2], "memory_peak_bytes"), (35 * GIB).to_string());
    assert_eq!(get(trainer[2], "memory_total_bytes"), "");

    // NVML cannot report pid 77's memory: empty, not 0.
    let p77 = rows
        .iter()
        .find(|r| get(r, "pid") == "77")
        .expect("pid 77 row");
    assert_eq!(get(p77, "memory_used_bytes"), "");

    // The failed GPU: a row with the error and no made-up numbers, and no process rows.
    let failed = rows.last().expect("rows");
    assert_eq!(get(failed, "gpu"), "1");
    assert_eq!(get(failed, "error"), "GPU is lost");
    assert_eq!(get(failed, "memory_used_bytes"), "");
    assert_eq!(get(failed, "temperature_celsius"), "");
}

#[test]
fn jsonl_rows_have_every_column_in_order_with_nulls() {
    let text = log(FlatFormat::Jsonl, &two_gpu_frames());
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 14);
    for r in &rows {
        assert_eq!(r.keys().cloned().collect::<Vec<_>>().len(), columns().len());
        for c in columns() {
            assert!(r.contains_key(c), "missing {c}");
        }
    }
    let p77 = rows
        .iter()
        .find(|r| r["pid"] == serde_json::json!(77))
        .expect("pid 77");
    assert_eq!(p77["memory_used_bytes"], serde_json::Value::Null);
    assert_eq!(p77["row"], "process");
    assert_eq!(rows[0]["memory_used_bytes"], serde_json::json!(40 * GIB));
    assert_eq!(rows[0]["utilization_percent"], serde_json::json!(87));
}

#[test]
fn jsonl_key_order_matches_the_csv_columns() {
    let text = log(FlatFormat::Jsonl, &two_gpu_frames());
    let first = text.lines().next().expect("a row");
    let mut last = 0;
    for c in columns() {
        let at = first
            .find(&format!("\"{c}\":"))
            .unwrap_or_else(|| panic!("{c} missing in {first}"));
        assert!(at >= last, "{c} out of order in {first}");
        last = at;
    }
}

#[test]
fn an_empty_csv_log_still_has_its_header() {
    let text = log(FlatFormat::Csv, &[]);
    assert_eq!(text.trim_end(), columns().join(","));
    assert_eq!(log(FlatFormat::Jsonl, &[]), "");
}

#[test]
fn create_writes_a_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gpus.csv");
    let mut log = FlatLog::create(&path, FlatFormat::Csv, "h".into()).expect("created");
    let frames = two_gpu_frames();
    let state = state_of(&frames[..2]);
    let Frame::Tick(t) = &frames[1] else {
        panic!("fixture frame 1 is a tick");
    };
    log.write_tick(&state, t).expect("written");
    let text = std::fs::read_to_string(&path).expect("readable");
    assert_eq!(
        text.lines().count(),
        1 + 5,
        "flushed after each tick: {text}"
    );
}

/// The flat logs carry what only gpumon has: written from a recording with companions, the
/// process rows of a companion's process have its allocator (allocated, reserved, epoch,
/// epoch floor, F, L, T), every process row names the script, not `python3`, and keeps the
/// full command; GPU rows leave the allocator columns empty.
#[test]
fn a_csv_from_a_recording_with_a_companion_has_the_allocator_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (csv_path, jsonl_path) = (dir.path().join("c.csv"), dir.path().join("c.jsonl"));
    let rec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/demo-companion.gpumon.jsonl.gz");
    crate::support::gpumon()
        .args(["replay", "--headless", "--csv"])
        .arg(&csv_path)
        .arg("--jsonl")
        .arg(&jsonl_path)
        .arg(&rec)
        .assert()
        .success();
    let allocator = [
        "allocator_allocated_bytes",
        "allocator_reserved_bytes",
        "allocator_epoch",
        "allocator_epoch_floor_bytes",
        "allocator_fragmentation_ratio",
        "allocator_largest_free_block_bytes",
        "allocator_free_bytes",
    ];
    // Appended after the columns files already had: readers by position keep working.
    assert_eq!(columns()[19], "error");
    assert_eq!(columns()[20], "command");
    assert_eq!(&columns()[21..28], allocator);
    let cols = columns();
    assert_eq!(
        &cols[cols.len() - 2..],
        ["rank", "job"],
        "the job's columns come last"
    );

    let mut r = csv::Reader::from_path(&csv_path).expect("csv");
    let header: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header, columns());
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.expect("row")).collect();
    let col = |n: &str| columns().iter().position(|c| *c == n).expect("column");
    let get = |row: &csv::StringRecord, n: &str| row.get(col(n)).unwrap_or("?").to_string();
    let full = rows
        .iter()
        .filter(|r| get(r, "row") == "process")
        .filter(|r| allocator.iter().all(|c| !get(r, c).is_empty()))
        .count();
    assert!(
        full > 50,
        "process rows with every allocator column: {full}"
    );
    let grab = rows
        .iter()
        .find(|r| get(r, "pid") == "600" && allocator.iter().all(|c| !get(r, c).is_empty()))
        .expect("pid 600 with its allocator");
    assert_eq!(
        get(grab, "process"),
        "scenario.py",
        "the script, not python3"
    );
    assert!(get(grab, "command").contains("scenario.py --name grab_all"));
    let frag: f64 = get(grab, "allocator_fragmentation_ratio")
        .parse()
        .expect("F");
    assert!((0.0..=1.0).contains(&frag));
    let (l, t): (u64, u64) = (
        get(grab, "allocator_largest_free_block_bytes")
            .parse()
            .expect("L"),
        get(grab, "allocator_free_bytes").parse().expect("T"),
    );
    assert!(l <= t, "L {l} <= T {t}");
    assert!(
        !rows
            .iter()
            .any(|r| get(r, "process") == "python3" && get(r, "command").contains(".py")),
        "no script is labelled python3"
    );
    for g in rows.iter().filter(|r| get(r, "row") == "gpu") {
        assert!(allocator.iter().all(|c| get(g, c).is_empty()));
    }

    let text = std::fs::read_to_string(&jsonl_path).expect("jsonl");
    let row: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|v| v["pid"] == 600 && v["allocator_fragmentation_ratio"].is_f64())
        .expect("pid 600 in the JSONL with its allocator");
    assert_eq!(row["process"], "scenario.py");
    assert!(row["allocator_epoch"].is_u64() && row["allocator_allocated_bytes"].is_u64());
}

/// docs/metrics.md's flat-log table names every column.
#[test]
fn every_column_is_documented() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"),
    )
    .expect("docs/metrics.md");
    let table = &docs[docs.find("## Flat logs").expect("flat logs section")..];
    for c in columns() {
        assert!(
            table.contains(&format!("`{c}`")),
            "docs/metrics.md leaves out {c}"
        );
    }
}

/// The allocator columns follow the metrics' table: every per-process allocator value that
/// `/metrics` serves (one number per process and GPU, not the size-class families) is a
/// column of the same name without `gpumon_`, holding the same value, so a new metric
/// reaches the flat logs without a second list to keep.
#[test]
fn every_allocator_value_served_is_a_column_with_the_same_value() {
    let frames = two_gpu_frames();
    let ex = gpumon::export::Exporter::new("fallback-host".into());
    ex.publish(&state_of(&frames));
    let text = ex.render(gpumon::export::Format::Prometheus);
    let csv_text = log(FlatFormat::Csv, &frames);
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(str::to_string)
        .collect();
    let last = r
        .records()
        .map(|r| r.expect("row"))
        .filter(|r| r.get(header.iter().position(|c| c == "pid").expect("pid")) == Some("4242"))
        .last()
        .expect("a row of the companion's process");
    let mut served = 0;
    for line in text.lines().filter(|l| l.starts_with("gpumon_allocator_")) {
        if line.contains("size_min_bytes=") || !line.contains("pid=\"4242\"") {
            continue;
        }
        let name = &line[..line.find('{').expect("labels")];
        let value: f64 = line
            .rsplit(' ')
            .next()
            .expect("value")
            .parse()
            .expect("number");
        let column = name.strip_prefix("gpumon_").expect("prefix");
        let at = header
            .iter()
            .position(|c| c == column)
            .unwrap_or_else(|| panic!("{name} is served but the flat logs have no {column}"));
        let logged: f64 = last
            .get(at)
            .expect("cell")
            .parse()
            .unwrap_or_else(|_| panic!("{column} is empty where /metrics serves {value}"));
        assert!(
            (logged - value).abs() <= value.abs() * 1e-12,
            "{column}: {logged} vs {value}"
        );
        served += 1;
    }
    assert!(served >= 10, "read the allocator families: {served}");
}
