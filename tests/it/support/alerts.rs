//! Builders for alert tests: a snapshot of one process on one H200-sized card.
#![allow(dead_code)]

use gpumon::fmt::{GIB_U64, MIB_U64};
use gpumon::model::alerts::inputs::{
    CompanionView, EpochPoint, FragView, GpuView, OomEvent, ProcView, Runtime, Snapshot,
};

pub const M: u64 = MIB_U64;
pub const G: u64 = GIB_U64;
pub const TOTAL: u64 = 141 * GIB_U64;
pub const EPOCH_MS: i64 = 600_000;

pub fn torch() -> Runtime {
    Runtime {
        framework: "torch".into(),
        allocator: Some("native".into()),
    }
}

/// Epoch points from a floor function; peak = floor + 4 GiB, reserved = peak + 1 GiB.
pub fn epochs(n: u64, floor: impl Fn(u64) -> u64) -> Vec<EpochPoint> {
    (0..n)
        .map(|e| {
            let f = floor(e);
            EpochPoint {
                epoch: e,
                t: (e as i64 + 1) * EPOCH_MS,
                floor: f,
                peak: Some(f + 4 * G),
                reserved: Some(f + 5 * G),
            }
        })
        .collect()
}

pub fn companion(epochs: Vec<EpochPoint>) -> CompanionView {
    let last = epochs.last().copied().unwrap_or_default();
    CompanionView {
        runtime: torch(),
        current_epoch: Some(last.epoch + 1),
        allocated: Some(last.floor),
        reserved: last.reserved,
        epochs,
        ..CompanionView::default()
    }
}

pub fn snapshot(now: i64, free: u64, procs: Vec<ProcView>) -> Snapshot {
    Snapshot {
        now,
        gpus: vec![GpuView {
            index: 0,
            total: TOTAL,
            free: Some(free),
        }],
        procs,
    }
}

pub fn proc_view(pid: u32, used: u64, c: Option<CompanionView>) -> ProcView {
    ProcView {
        pid,
        gpu: 0,
        nvml_used: Some(used),
        nvml_used_min_recent: Some(used),
        nvml_windows: Vec::new(),
        companion: c,
        ..ProcView::default()
    }
}

/// Scenario B of the H200 reproduction as companion state.
pub fn fragmented(now: i64) -> CompanionView {
    CompanionView {
        runtime: torch(),
        allocated: Some(G),
        reserved: Some(G + 9000 * M),
        frag: Some(FragView {
            t: now,
            free_total: 9000 * M,
            largest_free: Some(18 * M),
            largest_block: Some(64 * M),
            ..FragView::default()
        }),
        ..CompanionView::default()
    }
}

pub fn oom(t: i64, requested: u64, free_total: u64) -> OomEvent {
    OomEvent {
        t,
        requested: Some(requested),
        free_total: Some(free_total),
        largest_free: Some(18 * M),
        device_free: Some(0),
        limit: None,
        reserved: None,
        epoch: Some(4),
    }
}
