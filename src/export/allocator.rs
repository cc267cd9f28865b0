//! Allocator metrics from companions: what NVML cannot see inside a process.

use super::encode::{Encoder, Kind, Value};
use super::labels::{GpuLabels, proc_family, proc_gauge};
use super::snapshot::{AllocRow, Snapshot};

type Field = fn(&AllocRow) -> Option<u64>;

// Slices, not arrays: a new row is one entry, with no length to bump.
const BYTE_GAUGES: &[(&str, &str, Field)] = &[
    (
        "gpumon_allocator_allocated_bytes",
        "Bytes the framework allocator has handed out.",
        |r| r.allocated,
    ),
    (
        "gpumon_allocator_reserved_bytes",
        "Bytes the framework allocator holds from the driver (allocated plus cached).",
        |r| r.reserved,
    ),
    (
        "gpumon_allocator_cached_bytes",
        "Reserved but not allocated: cached by the allocator, free for reuse.",
        |r| r.cached,
    ),
    (
        "gpumon_allocator_peak_allocated_bytes",
        "Allocator's lifetime peak of allocated bytes (or the highest gpumon saw).",
        |r| r.peak_allocated,
    ),
    (
        "gpumon_allocator_peak_reserved_bytes",
        "Allocator's lifetime peak of reserved bytes (or the highest gpumon saw).",
        |r| r.peak_reserved,
    ),
    (
        "gpumon_allocator_limit_bytes",
        "Allocator limit (memory fraction, bytes_limit, memory_limit).",
        |r| r.limit,
    ),
    (
        "gpumon_allocator_free_bytes",
        "Free bytes inside the allocator's pool (T).",
        |r| r.free_total,
    ),
    (
        "gpumon_allocator_largest_free_block_bytes",
        "Largest free block in the allocator's pool (L): the biggest request that fits without growing.",
        |r| r.largest_free,
    ),
    (
        "gpumon_allocator_epoch_floor_bytes",
        "Allocated bytes at the end of the last completed epoch.",
        |r| r.epoch_floor,
    ),
];

pub(super) fn render(e: &mut Encoder, s: &Snapshot, gpu_labels: &[GpuLabels<'_>]) {
    if s.allocs.is_empty() {
        return;
    }
    let rows = &s.allocs;
    for &(name, help, field) in BYTE_GAUGES {
        proc_gauge(e, s, gpu_labels, rows, name, help, field);
    }
    proc_gauge(
        e,
        s,
        gpu_labels,
        rows,
        "gpumon_allocator_epoch_peak_bytes",
        "Highest allocated bytes during the last completed epoch.",
        |r| r.epoch_peak,
    );
    proc_family(
        e,
        s,
        gpu_labels,
        rows,
        (
            "gpumon_allocator_fragmentation_ratio",
            Kind::Gauge,
            Some("ratio"),
            "Fragmentation index F = 1 - largest_free/free: 0 = one free block, near 1 = shattered.",
        ),
        |r, emit| {
            if let Some(f) = r.frag_index {
                emit(&[], Value::Float(f));
            }
        },
    );
    let counts: &[(&'static str, Kind, &'static str, Field)] = &[
        (
            "gpumon_allocator_free_blocks",
            Kind::Gauge,
            "Number of free blocks in the allocator's pool.",
            |r| r.free_blocks,
        ),
        (
            "gpumon_allocator_epoch",
            Kind::Gauge,
            "Epoch in progress, as the companion reports it.",
            |r| r.epoch,
        ),
        (
            "gpumon_allocator_last_completed_epoch",
            Kind::Gauge,
            "Number of the last epoch the companion marked complete.",
            |r| r.last_epoch,
        ),
        (
            "gpumon_allocator_ooms",
            Kind::Counter,
            "Out-of-memory errors the allocator reported.",
            |r| r.ooms,
        ),
        (
            "gpumon_allocator_alloc_retries",
            Kind::Counter,
            "Allocations that succeeded only after the allocator freed its cache.",
            |r| r.alloc_retries,
        ),
    ];
    for &(name, kind, help, field) in counts {
        proc_family(
            e,
            s,
            gpu_labels,
            rows,
            (name, kind, None, help),
            |r, emit| {
                if let Some(v) = field(r) {
                    emit(&[], v);
                }
            },
        );
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
