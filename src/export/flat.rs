//! Flat logs for pandas and spreadsheets: one row per GPU per tick and one per
//! process per GPU per tick, in one file told apart by the `row` column.
//! Column names are part of the interface (docs/metrics.md): only ever append.

use std::io::{self, Write};
use std::path::Path;
use std::sync::LazyLock;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::model::sample::Tick;
use crate::model::state::State;
use crate::model::time::rfc3339;

use super::allocator::{ALLOC_VALUES, AllocValue};
use super::encode::Value;
use super::line_file::LineFile;
use super::snapshot::AllocRow;

/// The columns before the allocator's, in order.
const FIXED: [&str; 21] = [
    "time",
    "time_unix_ms",
    "hostname",
    "row",
    "gpu",
    "gpu_uuid",
    "pci_bus_id",
    "gpu_name",
    "pid",
    "user",
    "process",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "memory_peak_bytes",
    "utilization_percent",
    "temperature_celsius",
    "power_watts",
    "error",
    "command",
];

/// The allocator columns files had before the columns followed the metrics' table, in their
/// order (the metric names): they keep their places, and every other value of
/// `ALLOC_VALUES` follows in the table's order. Never edited: columns only ever append.
const ALLOCATOR_FIRST: [&str; 7] = [
    "gpumon_allocator_allocated_bytes",
    "gpumon_allocator_reserved_bytes",
    "gpumon_allocator_epoch",
    "gpumon_allocator_epoch_floor_bytes",
    "gpumon_allocator_fragmentation_ratio",
    "gpumon_allocator_largest_free_block_bytes",
    "gpumon_allocator_free_bytes",
];

/// The allocator's values in column order, with their column names.
static ALLOCATOR: LazyLock<Vec<(String, &'static AllocValue)>> = LazyLock::new(|| {
    let first = ALLOCATOR_FIRST
        .iter()
        .filter_map(|n| ALLOC_VALUES.iter().find(|v| v.name == *n));
    let rest = ALLOC_VALUES
        .iter()
        .filter(|v| !ALLOCATOR_FIRST.contains(&v.name));
    first.chain(rest).map(|v| (v.column(), v)).collect()
});

/// The columns after the allocator's: the distributed job a process is a rank of.
const LATER: [&str; 2] = ["rank", "job"];

/// Column order of both formats; the CSV header row.
pub fn columns() -> Vec<&'static str> {
    FIXED
        .iter()
        .copied()
        .chain(ALLOCATOR.iter().map(|(c, _)| c.as_str()))
        .chain(LATER)
        .collect()
}

/// One row; `None` is an empty CSV cell or JSON null: unknown, never 0.
#[derive(Debug, Clone)]
struct Row<'a> {
    time: &'a str,
    time_unix_ms: i64,
    hostname: &'a str,
    row: &'static str,
    gpu: u32,
    gpu_uuid: &'a str,
    pci_bus_id: &'a str,
    gpu_name: &'a str,
    pid: Option<u32>,
    user: Option<&'a str>,
    process: Option<&'a str>,
    memory_used_bytes: Option<u64>,
    memory_total_bytes: Option<u64>,
    memory_free_bytes: Option<u64>,
    memory_reserved_bytes: Option<u64>,
    memory_peak_bytes: Option<u64>,
    utilization_percent: Option<u32>,
    temperature_celsius: Option<u32>,
    power_watts: Option<f64>,
    error: Option<&'a str>,
    command: Option<&'a str>,
    /// The process's allocator on this GPU (a companion's), for the allocator columns.
    alloc: Option<&'a AllocRow>,
    rank: Option<u32>,
    job: Option<&'a str>,
}

/// A row serialised as one struct: a CSV record in column order, or a JSON object whose
/// keys come in that order.
struct Named<'a, 'b>(&'b Row<'a>);

impl Serialize for Named<'_, '_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut st = ser.serialize_struct("Row", FIXED.len() + ALLOCATOR.len() + LATER.len())?;
        st.serialize_field("time", r.time)?;
        st.serialize_field("time_unix_ms", &r.time_unix_ms)?;
        st.serialize_field("hostname", r.hostname)?;
        st.serialize_field("row", r.row)?;
        st.serialize_field("gpu", &r.gpu)?;
        st.serialize_field("gpu_uuid", r.gpu_uuid)?;
        st.serialize_field("pci_bus_id", r.pci_bus_id)?;
        st.serialize_field("gpu_name", r.gpu_name)?;
        st.serialize_field("pid", &r.pid)?;
        st.serialize_field("user", &r.user)?;
        st.serialize_field("process", &r.process)?;
        st.serialize_field("memory_used_bytes", &r.memory_used_bytes)?;
        st.serialize_field("memory_total_bytes", &r.memory_total_bytes)?;
        st.serialize_field("memory_free_bytes", &r.memory_free_bytes)?;
        st.serialize_field("memory_reserved_bytes", &r.memory_reserved_bytes)?;
        st.serialize_field("memory_peak_bytes", &r.memory_peak_bytes)?;
        st.serialize_field("utilization_percent", &r.utilization_percent)?;
        st.serialize_field("temperature_celsius", &r.temperature_celsius)?;
        st.serialize_field("power_watts", &r.power_watts)?;
        st.serialize_field("error", &r.error)?;
        st.serialize_field("command", &r.command)?;
        for (name, v) in ALLOCATOR.iter() {
            match r.alloc.and_then(|a| v.value(a)) {
                Some(Value::Int(x)) => st.serialize_field(name, &Some(x))?,
                Some(Value::Float(x)) => st.serialize_field(name, &Some(x))?,
                None => st.serialize_field(name, &None::<u64>)?,
            }
        }
        st.serialize_field("rank", &r.rank)?;
        st.serialize_field("job", &r.job)?;
        st.end()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlatFormat {
    Csv,
    Jsonl,
}

pub struct FlatLog {
    format: FlatFormat,
    out: LineFile,
    hostname: String,
}

impl FlatLog {
    /// Create (truncate) `path` and write the CSV header.
    pub fn create(path: &Path, format: FlatFormat, hostname: String) -> io::Result<FlatLog> {
        FlatLog::on(LineFile::create(path)?, format, hostname)
    }

    /// `hostname` is used until a recording header names the host.
    pub fn new(
        out: Box<dyn Write + Send>,
        format: FlatFormat,
        hostname: String,
    ) -> io::Result<FlatLog> {
        FlatLog::on(LineFile::new(out, "flat log"), format, hostname)
    }

    fn on(out: LineFile, format: FlatFormat, hostname: String) -> io::Result<FlatLog> {
        let mut log = FlatLog {
            format,
            out,
            hostname,
        };
        if format == FlatFormat::Csv {
            let mut rows = Rows::new(format);
            if let Rows::Csv(w) = &mut rows {
                w.write_record(columns())?;
            }
            log.out.write_lines(&rows.finish()?)?;
        }
        Ok(log)
    }

    /// Write the rows of `tick`. Call after `state.apply` of that tick, so names,
    /// users and peaks include it. Flushes, so `tail -f` and a crash lose nothing.
    /// A failed write cuts the file after the previous tick's rows and names
    /// the file in the error; later ticks are refused.
    pub fn write_tick(&mut self, state: &State, tick: &Tick) -> io::Result<()> {
        let mut rows = Rows::new(self.format);
        let time = rfc3339(tick.t);
        let hostname = state
            .header
            .as_ref()
            .map(|h| h.host.as_str())
            .filter(|h| !h.is_empty())
            .unwrap_or(&self.hostname);
        // The allocator of each process on each GPU, as /metrics has it (companions only).
        let allocs = if state.companions.by_pid.is_empty() {
            Vec::new()
        } else {
            super::snapshot::alloc_rows(state)
        };
        let jobs = state.jobs();
        for s in &tick.gpus {
            let g = state.gpu(s.index);
            let (uuid, pci, name) = g.map_or(("", "", ""), |g| {
                (&*g.info.uuid, &*g.info.pci_bus_id, &*g.info.name)
            });
            let gpu_row = Row {
                time: &time,
                time_unix_ms: tick.t,
                hostname,
                row: "gpu",
                gpu: s.index,
                gpu_uuid: uuid,
                pci_bus_id: pci,
                gpu_name: name,
                pid: None,
                user: None,
                process: None,
                memory_used_bytes: s.mem.map(|m| m.used),
                memory_total_bytes: s.mem.map(|m| m.total).or(g.map(|g| g.info.memory_total)),
                memory_free_bytes: s.mem.map(|m| m.free),
                memory_reserved_bytes: s.mem.map(|m| m.reserved),
                memory_peak_bytes: g.filter(|g| g.peak.at != 0).map(|g| g.peak.value),
                utilization_percent: s.util,
                temperature_celsius: s.temp_c,
                power_watts: s.power_mw.map(|mw| f64::from(mw) / 1000.0),
                error: s.error.as_deref(),
                command: None,
                alloc: None,
                rank: None,
                job: None,
            };
            rows.push(&Named(&gpu_row))?;
            if s.error.is_some() {
                continue;
            }
            for p in &s.procs {
                let ps = state.procs.get(&p.pid);
                let info = ps.map(|ps| &ps.info);
                let peak = ps
                    .and_then(|ps| ps.gpus.get(&s.index))
                    .filter(|pg| pg.peak.at != 0)
                    .map(|pg| pg.peak.value);
                let process = ps.and_then(|ps| ps.who.label.clone());
                let job = jobs.iter().find(|j| j.has(p.pid)).map(|j| j.id.as_str());
                let alloc = allocs.iter().find(|a| a.gpu == s.index && a.pid == p.pid);
                let row = Row {
                    row: "process",
                    pid: Some(p.pid),
                    user: info.and_then(|i| i.user.as_deref()),
                    process: process.as_deref(),
                    command: info.and_then(|i| i.cmdline.as_deref()),
                    alloc,
                    rank: ps.and_then(|ps| ps.who.rank),
                    job,
                    memory_used_bytes: p.used,
                    memory_total_bytes: None,
                    memory_free_bytes: None,
                    memory_reserved_bytes: None,
                    memory_peak_bytes: peak,
                    utilization_percent: None,
                    temperature_celsius: None,
                    power_watts: None,
                    error: None,
                    ..gpu_row.clone()
                };
                rows.push(&Named(&row))?;
            }
        }
        self.out.write_lines(&rows.finish()?)
    }
}

/// One tick's rows, encoded in memory, to go to the file in one piece.
enum Rows {
    Csv(Box<csv::Writer<Vec<u8>>>),
    Jsonl(Vec<u8>),
}

impl Rows {
    fn new(format: FlatFormat) -> Rows {
        match format {
            FlatFormat::Csv => Rows::Csv(Box::new(
                csv::WriterBuilder::new()
                    .has_headers(false)
                    .from_writer(Vec::new()),
            )),
            FlatFormat::Jsonl => Rows::Jsonl(Vec::new()),
        }
    }

    fn push(&mut self, row: &Named<'_, '_>) -> io::Result<()> {
        match self {
            Rows::Csv(w) => w.serialize(row).map_err(io::Error::other),
            Rows::Jsonl(b) => {
                serde_json::to_writer(&mut *b, row)?;
                b.push(b'\n');
                Ok(())
            }
        }
    }

    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Rows::Csv(w) => w.into_inner().map_err(|e| io::Error::other(e.to_string())),
            Rows::Jsonl(b) => Ok(b),
        }
    }
}
