//! Allocator metrics from companions: what NVML cannot see inside a process.

use super::encode::{Encoder, Kind, Value};
use super::labels::{GpuLabels, proc_family, proc_gauge};
use super::snapshot::{AllocRow, Snapshot};

type Field = fn(&AllocRow) -> Option<u64>;

/// How a value is read from a row and served.
#[derive(Clone, Copy)]
pub(super) enum Get {
    /// A gauge in bytes.
    Bytes(Field),
    /// A plain number: a gauge or a counter.
    Count(Kind, Field),
    /// A gauge that is a ratio.
    Ratio(fn(&AllocRow) -> Option<f64>),
}

/// A process's allocator value on one GPU: served on `/metrics` as a family of its name, and
/// written to the CSV/JSONL logs (`flat`) as a column of that name without `gpumon_` (with
/// `_total` for a counter, as served). One row here is both.
pub(super) struct AllocValue {
    pub(super) name: &'static str,
    pub(super) help: &'static str,
    pub(super) get: Get,
}

impl AllocValue {
    /// The row's value, as served.
    pub(super) fn value(&self, r: &AllocRow) -> Option<Value> {
        match self.get {
            Get::Bytes(f) | Get::Count(_, f) => f(r).map(Value::Int),
            Get::Ratio(f) => f(r).map(Value::Float),
        }
    }

    /// The name of its samples on `/metrics` without `gpumon_`: the flat logs' column.
    pub(super) fn column(&self) -> String {
        let name = self.name.strip_prefix("gpumon_").unwrap_or(self.name);
        match self.get {
            Get::Count(Kind::Counter, _) => format!("{name}_total"),
            _ => name.to_string(),
        }
    }
}

const fn bytes(name: &'static str, help: &'static str, f: Field) -> AllocValue {
    AllocValue {
        name,
        help,
        get: Get::Bytes(f),
    }
}

const fn count(name: &'static str, kind: Kind, help: &'static str, f: Field) -> AllocValue {
    AllocValue {
        name,
        help,
        get: Get::Count(kind, f),
    }
}

// A slice, not an array: a new value is one entry, with no length to bump. Served in this
// order; the flat logs keep their columns' first order (`flat::ALLOCATOR_FIRST`) and append
// the others in this order.
pub(super) const ALLOC_VALUES: &[AllocValue] = &[
    bytes(
        "gpumon_allocator_allocated_bytes",
        "Bytes the framework allocator has handed out.",
        |r| r.allocated,
    ),
    bytes(
        "gpumon_allocator_reserved_bytes",
        "Bytes the framework allocator holds from the driver (allocated plus cached).",
        |r| r.reserved,
    ),
    bytes(
        "gpumon_allocator_cached_bytes",
        "Reserved but not allocated: cached by the allocator, free for reuse.",
        |r| r.cached,
    ),
    bytes(
        "gpumon_allocator_peak_allocated_bytes",
        "Allocator's lifetime peak of allocated bytes (or the highest gpumon saw).",
        |r| r.peak_allocated,
    ),
    bytes(
        "gpumon_allocator_peak_reserved_bytes",
        "Allocator's lifetime peak of reserved bytes (or the highest gpumon saw).",
        |r| r.peak_reserved,
    ),
    bytes(
        "gpumon_allocator_limit_bytes",
        "Allocator limit (memory fraction, bytes_limit, memory_limit).",
        |r| r.limit,
    ),
    bytes(
        "gpumon_allocator_free_bytes",
        "Free bytes inside the allocator's pool (T).",
        |r| r.free_total,
    ),
    bytes(
        "gpumon_allocator_largest_free_block_bytes",
        "Largest free block in the allocator's pool (L): the biggest request that fits without growing.",
        |r| r.largest_free,
    ),
    bytes(
        "gpumon_allocator_epoch_floor_bytes",
        "Allocated bytes at the end of the last completed epoch.",
        |r| r.epoch_floor,
    ),
    bytes(
        "gpumon_allocator_epoch_peak_bytes",
        "Highest allocated bytes during the last completed epoch.",
        |r| r.epoch_peak,
    ),
    AllocValue {
        name: "gpumon_allocator_fragmentation_ratio",
        help: "Fragmentation index F = 1 - largest_free/free: 0 = one free block, near 1 = shattered.",
        get: Get::Ratio(|r| r.frag_index),
    },
    count(
        "gpumon_allocator_free_blocks",
        Kind::Gauge,
        "Number of free blocks in the allocator's pool.",
        |r| r.free_blocks,
    ),
    count(
        "gpumon_allocator_epoch",
        Kind::Gauge,
        "Epoch in progress, as the companion reports it.",
        |r| r.epoch,
    ),
    count(
        "gpumon_allocator_last_completed_epoch",
        Kind::Gauge,
        "Number of the last epoch the companion marked complete.",
        |r| r.last_epoch,
    ),
    count(
        "gpumon_allocator_ooms",
        Kind::Counter,
        "Out-of-memory errors the allocator reported.",
        |r| r.ooms,
    ),
    count(
        "gpumon_allocator_alloc_retries",
        Kind::Counter,
        "Allocations that succeeded only after the allocator freed its cache.",
        |r| r.alloc_retries,
    ),
];

pub(super) fn render(e: &mut Encoder, s: &Snapshot, gpu_labels: &[GpuLabels<'_>]) {
    if s.allocs.is_empty() {
        return;
    }
    let rows = &s.allocs;
    for v in ALLOC_VALUES {
        match v.get {
            Get::Bytes(f) => proc_gauge(e, s, gpu_labels, rows, v.name, v.help, f),
            Get::Count(kind, f) => proc_family(
                e,
                s,
                gpu_labels,
                rows,
                (v.name, kind, None, v.help),
                |r, emit| {
                    if let Some(x) = f(r) {
                        emit(&[], x);
                    }
                },
            ),
            Get::Ratio(f) => proc_family(
                e,
                s,
                gpu_labels,
                rows,
                (v.name, Kind::Gauge, Some("ratio"), v.help),
                |r, emit| {
                    if let Some(x) = f(r) {
                        emit(&[], Value::Float(x));
                    }
                },
            ),
        }
    }
    // Bucketed gauges rather than a Prometheus histogram: this is a picture of
    // the pool now, not a count of events, and gauges mean the same in both formats.
    let hist_families: &[(&'static str, Option<&'static str>, &'static str, bool)] = &[
        (
            "gpumon_allocator_free_block_class_blocks",
            None,
            "Free blocks of size_min_bytes up to twice that.",
            false,
        ),
        (
            "gpumon_allocator_free_block_class_bytes",
            Some("bytes"),
            "Free bytes in blocks of size_min_bytes up to twice that.",
            true,
        ),
    ];
    for &(name, unit, help, bytes) in hist_families {
        proc_family(
            e,
            s,
            gpu_labels,
            rows,
            (name, Kind::Gauge, unit, help),
            |r, emit| {
                for &(k, count, total) in &r.free_hist {
                    let Some(min) = 1u64.checked_shl(k) else {
                        continue;
                    };
                    let min = min.to_string();
                    emit(
                        &[("size_min_bytes", &min)],
                        if bytes { total } else { count },
                    );
                }
            },
        );
    }
}
