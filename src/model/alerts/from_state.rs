//! Builds the rules' plain inputs from `State`: NVML devices and processes, and the
//! companion's allocator state matched to the same physical GPU. Live runs and replays
//! both go through here, so a replay raises the alerts the live run would have.

use crate::model::named::EventKind;
use std::collections::BTreeSet;

use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::model::series::Series;

use crate::model::state::State;
use crate::model::time::Ts;

use super::config::AlertConfig;
use super::grab_all;
use super::inputs::{
    CompanionView, Envelope, EpochPoint, FragView, GpuView, OomEvent, ProcView, Runtime, Snapshot,
    WindowPoint,
};

/// Completed fixed windows of a series (minimum of each), aligned to absolute time,
/// starting no earlier than `start` (warm-up excluded), at most `keep` of them.
pub fn fixed_windows(
    series: &Series,
    start: Ts,
    now: Ts,
    width: i64,
    keep: usize,
) -> Vec<WindowPoint> {
    if width <= 0 || keep == 0 {
        return Vec::new();
    }
    let first_idx = start.div_euclid(width) + i64::from(start.rem_euclid(width) != 0);
    let last_idx = now.div_euclid(width) - 1;
    if last_idx < first_idx {
        return Vec::new();
    }
    let from_idx = first_idx.max(last_idx - keep as i64 + 1);
    let mins = series.window_mins(from_idx, last_idx, width);
    // Sized once: this runs for every process at every evaluation.
    let mut out = Vec::with_capacity(mins.len());
    out.extend(
        (from_idx..=last_idx)
            .zip(mins)
            .filter(|(_, min)| min.is_finite() && *min >= 0.0)
            .map(|(idx, min)| WindowPoint {
                index: idx,
                t: (idx + 1) * width,
                min: min as u64,
            }),
    );
    out
}

fn runtime(p: &ProcAlloc) -> Runtime {
    let h = p.hello.as_ref();
    Runtime {
        framework: h.and_then(|h| h.framework.clone()).unwrap_or_default(),
        allocator: h.and_then(|h| h.allocator.clone()),
    }
}

fn companion_view(p: &ProcAlloc, d: &DevAlloc, now: Ts, cfg: &AlertConfig) -> CompanionView {
    let g = &cfg.growth;
    // The companion may hold 10,000 epochs; the rules look at most twice the longest window
    // back (noise history) plus the confirmation endings; the envelope before that travels
    // as its range only.
    let keep_epochs = 2 * g.max_window + g.confirm + 2;
    let skip = d.epochs.len().saturating_sub(keep_epochs);
    let mut epochs = Vec::with_capacity(d.epochs.len() - skip);
    epochs.extend(d.epochs.range(skip..).filter_map(|e| {
        Some(EpochPoint {
            epoch: e.epoch,
            t: e.t.unwrap_or(0),
            floor: e.floor?,
            peak: e.peak,
            reserved: e.reserved,
        })
    }));
    let baseline_from = d
        .events
        .iter()
        .filter(|e| e.kind == EventKind::ConfigChange)
        .filter_map(|e| e.t)
        .max();
    let mut envelope = Envelope::default();
    for e in d.epochs.range(skip.saturating_sub(g.envelope_epochs)..skip) {
        let usable =
            e.epoch >= g.warmup_epochs && baseline_from.is_none_or(|b| e.t.unwrap_or(0) >= b);
        if let (true, Some(floor)) = (usable, e.floor) {
            envelope.take(floor, e.peak, e.reserved);
        }
    }
    let current_epoch = d
        .last
        .as_ref()
        .and_then(|s| s.epoch)
        .or(d.epochs.back().map(|e| e.epoch));
    let keep = g.max_window + g.confirm;
    // The interposer's live bytes and an allocator's allocated count are both exact: no
    // cache, so a short window's minimum already is the program's floor between requests
    // (a window only needs to span a few steps or requests). 30-second windows after a
    // minute's warm-up left a server leaking 2.5 MiB/s unflagged for 150 s.
    let (width, warmup) = if d.interposer {
        (g.exact_window_ms, g.exact_window_warmup_ms)
    } else {
        (g.window_ms, g.window_warmup_ms)
    };
    // The growth rule reads the windows only of a run without epoch markers.
    let allocated_windows = if epochs.is_empty() {
        fixed_windows(
            &d.allocated,
            p.first_seen.saturating_add(warmup),
            now,
            width,
            keep,
        )
    } else {
        Vec::new()
    };
    let frag = d.frag.as_ref().and_then(|f| {
        Some(FragView {
            t: f.t,
            free_total: f.free_total?,
            largest_free: f.largest_free,
            largest_block: f.largest_block,
            hist: f.hist.clone(),
            free_top: f.free_top.clone(),
            live_top: f.live_top.clone(),
            requests: f.requests.clone(),
        })
    });
    let ooms = d
        .ooms()
        .map(|e| OomEvent {
            t: e.t.unwrap_or(0),
            requested: e.requested,
            free_total: e.free_total,
            largest_free: e.largest_free,
            device_free: e.device_free,
            limit: e.limit.or(d.limit()),
            reserved: e.t.and_then(|t| {
                // The highest value of the second before: PyTorch releases its unused
                // segments before it gives up, so the newest sample can be lower than what
                // it held when the request failed.
                d.reserved
                    .range(t.saturating_sub(1_000), t)
                    .map(|(_, hi)| hi.max(0.0) as u64)
            }),
            epoch: current_epoch,
        })
        .collect();
    CompanionView {
        envelope,
        runtime: runtime(p),
        epochs,
        current_epoch,
        last_epoch: None,
        baseline_from,
        allocated_windows,
        allocated: d.allocated_now(),
        reserved: d.reserved_now(),
        limit: d.limit(),
        frag,
        largest_alloc: d.largest_alloc,
        ooms,
        retries: d.last.as_ref().and_then(|s| s.num_alloc_retries),
        policy: p.hello.as_ref().and_then(|h| h.policy.clone()),
        settings: p
            .hello
            .as_ref()
            .map(|h| {
                h.settings
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        interposer: d.interposer,
    }
}

/// Epoch markers of a companion that reads no framework, with NVML's usage of the process
/// at each marker as the floor (the lowest reading of the second before it: the marker
/// comes at the epoch end, after the step's transients were freed).
fn nvml_epochs(p: &ProcAlloc, used: &Series, cfg: &AlertConfig) -> Vec<EpochPoint> {
    let keep = 2 * cfg.growth.max_window + cfg.growth.confirm + 2;
    let marks: Vec<(u64, Ts)> = p
        .devices
        .values()
        .flat_map(|d| d.epochs.iter())
        .filter(|e| e.floor.is_none())
        .filter_map(|e| Some((e.epoch, e.t?)))
        .collect();
    let mut out: Vec<EpochPoint> = marks
        .iter()
        .skip(marks.len().saturating_sub(keep))
        .filter_map(|&(epoch, t)| {
            let (lo, _) = used.range(t.saturating_sub(1_000), t)?;
            Some(EpochPoint {
                epoch,
                t,
                floor: lo.max(0.0) as u64,
                peak: None,
                reserved: None,
            })
        })
        .collect();
    out.sort_by_key(|e| e.epoch);
    out.dedup_by_key(|e| e.epoch);
    out
}

/// The snapshot the rules read, built from the model at `state.now`.
pub fn snapshot(state: &State, cfg: &AlertConfig) -> Snapshot {
    let now = state.now;
    let g = &cfg.growth;
    // The cards as the rules see them (the grab-all gate below reads their size here too).
    let gpus: Vec<GpuView> = state
        .gpus
        .iter()
        .map(|gs| GpuView {
            index: gs.info.index,
            total: gs.total(),
            free: if gs.error().is_some() {
                None
            } else {
                gs.last.as_ref().and_then(|s| s.mem).map(|m| m.free)
            },
        })
        .collect();
    let mut pairs: BTreeSet<(u32, u32)> = state
        .procs
        .iter()
        .flat_map(|(pid, p)| p.gpus.keys().map(move |gpu| (*pid, *gpu)))
        .collect();
    // Each companion's device on each card, looked up once per evaluation.
    let placed: Vec<(u32, u32, &DevAlloc)> = state
        .companions
        .by_pid
        .keys()
        .flat_map(|pid| state.live_allocs_of(*pid).map(|(gpu, d)| (*pid, gpu, d)))
        .collect();
    pairs.extend(placed.iter().map(|(pid, gpu, _)| (*pid, *gpu)));
    let jobs = state.jobs();
    let procs = pairs
        .into_iter()
        .map(|(pid, gpu)| {
            let ps = state.procs.get(&pid);
            let pg = ps.and_then(|p| p.gpus.get(&gpu));
            let first_seen = ps.map_or(now, |p| p.first_seen);
            let persist = cfg.grab_all.persist_ms;
            // Not read below the rule's lowest gate: the lowest reading is no higher than
            // the last, so it cannot pass a gate the last does not (and the rule's words
            // do not show it then). A two-minute scan of every process every second.
            let total = gpus.iter().find(|g| g.index == gpu).map_or(0, |g| g.total);
            let below_gate =
                |used: u64| (used as f64) < grab_all::lowest_gate(&cfg.grab_all) * total as f64;
            let nvml_used_min_recent = pg.and_then(|pg| {
                (first_seen <= now - persist && !pg.last_used.is_some_and(below_gate))
                    .then(|| pg.used.range(now - persist, now))
                    .flatten()
                    .map(|(lo, _)| lo.max(0.0) as u64)
            });
            let companion = placed
                .iter()
                .find(|(p, g, _)| (*p, *g) == (pid, gpu))
                .and_then(|(_, _, d)| {
                    let p = state.companions.get(pid)?;
                    Some(companion_view(p, d, now, cfg))
                });
            // NVML's windows are read only when the companion gives no epochs.
            let has_epochs = companion.as_ref().is_some_and(|c| !c.epochs.is_empty());
            let nvml_windows = match pg {
                Some(pg) if !has_epochs => fixed_windows(
                    &pg.used,
                    first_seen.saturating_add(g.nvml_window_warmup_ms),
                    now,
                    g.nvml_window_ms,
                    g.max_window + g.confirm,
                ),
                _ => Vec::new(),
            };
            let comp = state.companions.get(pid);
            // A companion that reads no framework has no floors of its own (and may be
            // matched to no card, or to this one by default): NVML gives them.
            let no_floors = companion.as_ref().is_none_or(|c| c.epochs.is_empty());
            let nvml_epochs = match (no_floors, comp, pg) {
                (true, Some(p), Some(pg)) => nvml_epochs(p, &pg.used, cfg),
                _ => Vec::new(),
            };
            // The exit the model marked (NVML stopped listing it and its companion went
            // away): the row's `exited` and the alerts' end are one decision.
            let exited = ps.is_some_and(|p| p.exit.is_some());
            ProcView {
                pid,
                gpu,
                nvml_used: pg.and_then(|pg| pg.last_used),
                nvml_used_min_recent,
                nvml_windows,
                nvml_epochs,
                companion,
                exited,
                rank: ps.and_then(|p| p.who.rank),
                job: jobs.iter().find(|j| j.has(pid)).map(|j| j.id.clone()),
            }
        })
        .collect();
    Snapshot { now, gpus, procs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_complete_aligned_and_skip_warmup() {
        let mut s = Series::default();
        // 35 minutes of samples, one per second, rising one byte per second.
        for i in 0..(35 * 60) {
            s.push(i * 1000, Some(i as f64));
        }
        let now = 35 * 60_000;
        let w = fixed_windows(&s, 0, now, 600_000, 20);
        assert_eq!(w.len(), 3, "the 30–35 min window is not complete");
        assert_eq!(w[0].min, 0);
        assert_eq!(w[1].min, 600);
        assert_eq!(w[2].t, 1_800_000);
        let w = fixed_windows(&s, 60_000, now, 600_000, 20);
        assert_eq!(w.len(), 2, "a window that starts inside warm-up is skipped");
        assert_eq!(fixed_windows(&s, 0, now, 600_000, 1).len(), 1);
        assert!(fixed_windows(&s, 0, now, 0, 5).is_empty());
    }
}
