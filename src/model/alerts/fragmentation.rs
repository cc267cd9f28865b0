//! Fragmentation risk (T ≥ R > max(L, D)) and OOM events, with advice that names the
//! framework's own remedy. See instrumentation research §8.4 and docs/alerts.md.

use super::format::{compact, fit_summary, who};
use super::snapshot::{OomEvent, Runtime};
use super::{AlertKey, AlertKind, Basis, Evidence, Finding, Gate, Named, Severity};

/// Where R, the workload's largest request, was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestSource {
    /// The allocator's largest-allocation counter (JAX `largest_alloc_size`, companion `largest_alloc`).
    AllocCounter,
    /// The largest live block in the last block map.
    BlockMap,
    /// The request of the last OOM.
    LastOom,
}

impl RequestSource {
    fn words(self) -> &'static str {
        match self {
            RequestSource::AllocCounter => "the largest allocation this run has made",
            RequestSource::BlockMap => "the largest block in the last snapshot",
            RequestSource::LastOom => "the request of the last OOM",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FragInput {
    /// T: free bytes the allocator holds.
    pub free_total: u64,
    /// L: its largest free block; without it the rule cannot decide.
    pub largest_free: Option<u64>,
    /// D: what the process can still get from the card (NVML free, capped by its limit).
    pub device_avail: u64,
    /// R: the largest request the workload makes.
    pub request: u64,
    pub request_source: RequestSource,
}

/// The framework's remedy for a fragmented cache, as one or two sentences.
pub fn advice(rt: &Runtime) -> String {
    let alloc = rt.allocator.as_deref().unwrap_or("");
    match rt.framework.as_str() {
        "torch" if alloc == "expandable_segments" => "Expandable segments are already on, so live tensors pin the holes: restart from a checkpoint and lower the peak (smaller batch, activation checkpointing) or free long-lived tensors between steps.".into(),
        "torch" => "Remedy: restart from a checkpoint with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows segments in place instead of splitting fixed ones.".into(),
        "tensorflow" => "Remedy: restart from a checkpoint with TF_GPU_ALLOCATOR=cuda_malloc_async, or give the BFC allocator a fixed memory_limit.".into(),
        "jax" => "Remedy: restart from a checkpoint; XLA's pool cannot be compacted, but XLA_PYTHON_CLIENT_ALLOCATOR=platform avoids pooling (slower) and a larger XLA_PYTHON_CLIENT_MEM_FRACTION gives it more room.".into(),
        _ => "Remedy: restart from a checkpoint; a caching allocator cannot compact its cache while tensors are alive.".into(),
    }
}

fn named(name: &str, bytes: u64) -> Named {
    Named {
        name: name.into(),
        bytes,
    }
}

/// Fragmentation risk: the next large request fits in the free total but in no single
/// hole and not in new card memory. `None` when the condition does not hold or L is unknown.
pub fn risk(
    pid: u32,
    gpu: u32,
    input: &FragInput,
    rt: &Runtime,
    epoch: Option<u64>,
) -> Option<Finding> {
    let l = input.largest_free?;
    let (t, d, r) = (input.free_total, input.device_avail, input.request);
    let fits_total = t >= r;
    let fits_nowhere = r > l.max(d);
    if !(fits_total && fits_nowhere) || r == 0 {
        return None;
    }
    let message = format!(
        "PID {pid} on GPU {gpu}: the allocator holds {} free, but its largest hole is {} and the card can give only {} more, so the next {} request ({}) fits in no single hole: an OOM from fragmentation is likely. {}",
        compact(t),
        compact(l),
        compact(d),
        compact(r),
        input.request_source.words(),
        advice(rt)
    );
    let summary = format!("{} frag: {} fits no hole", who(Some(pid), gpu), compact(r));
    let f_index = if t > 0 {
        1.0 - l as f64 / t as f64
    } else {
        0.0
    };
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::FragmentationRisk,
            pid: Some(pid),
            gpu,
        },
        severity: Severity::Warning,
        message,
        summary: fit_summary(summary),
        evidence: Evidence {
            basis: Basis::Allocator,
            values: vec![
                named("T free in cache", t),
                named("L largest hole", l),
                named("D from card", d),
                named("R largest request", r),
            ],
            gates: vec![
                Gate {
                    name: "T ≥ R".into(),
                    value: t as f64,
                    threshold: r as f64,
                    passed: fits_total,
                },
                Gate {
                    name: "R > max(L, D)".into(),
                    value: r as f64,
                    threshold: l.max(d) as f64,
                    passed: fits_nowhere,
                },
                Gate {
                    name: "F = 1 − L/T".into(),
                    value: f_index,
                    threshold: 0.0,
                    passed: true,
                },
            ],
            ..Evidence::default()
        },
        epoch,
    })
}

/// An OOM event: a fragmentation OOM when the allocator held at least the request in
/// total, a plain OOM otherwise (or when T is unknown). `count` OOMs so far.
pub fn oom(pid: u32, gpu: u32, ev: &OomEvent, rt: &Runtime, count: u32) -> Finding {
    let req = ev.requested;
    let frag = matches!((ev.free_total, req), (Some(t), Some(r)) if t >= r);
    let req_s = req.map_or_else(
        || "an allocation".to_string(),
        |r| format!("a {} request", compact(r)),
    );
    let mut values = Vec::new();
    if let Some(r) = req {
        values.push(named("requested", r));
    }
    if let Some(t) = ev.free_total {
        values.push(named("T free in cache", t));
    }
    if let Some(l) = ev.largest_free {
        values.push(named("L largest hole", l));
    }
    if let Some(d) = ev.device_free {
        values.push(named("card free", d));
    }
    let again = if count > 1 {
        format!(" (OOM number {count})")
    } else {
        String::new()
    };
    let (kind, message, summary) = if frag {
        let hole = ev
            .largest_free
            .map_or_else(String::new, |l| format!(", largest hole {}", compact(l)));
        (
            AlertKind::FragmentationOom,
            format!(
                "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s} while its allocator held {} free{hole}: a fragmentation OOM, the memory was there but in pieces. {}",
                compact(ev.free_total.unwrap_or(0)),
                advice(rt)
            ),
            format!(
                "{} frag OOM: {} in pieces",
                who(Some(pid), gpu),
                compact(ev.free_total.unwrap_or(0))
            ),
        )
    } else {
        let free = match (ev.free_total, ev.device_free) {
            (Some(t), Some(d)) => format!(
                "; the allocator held only {} free and the card {}",
                compact(t),
                compact(d)
            ),
            (Some(t), None) => format!("; the allocator held only {} free", compact(t)),
            (None, Some(d)) => format!("; the card had {} free", compact(d)),
            (None, None) => String::new(),
        };
        (
            AlertKind::Oom,
            format!(
                "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}{free}. The run needs a smaller peak (batch size, activation checkpointing) or a larger share of the card."
            ),
            format!(
                "{} OOM{}",
                who(Some(pid), gpu),
                req.map_or_else(String::new, |r| format!(" asking {}", compact(r)))
            ),
        )
    };
    Finding {
        key: AlertKey {
            kind,
            pid: Some(pid),
            gpu,
        },
        severity: Severity::Critical,
        message,
        summary: fit_summary(summary),
        evidence: Evidence {
            basis: Basis::Event,
            values,
            count: Some(count),
            ..Evidence::default()
        },
        epoch: ev.epoch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bytes::{GIB_U64, MIB_U64};

    fn torch() -> Runtime {
        Runtime {
            framework: "torch".into(),
            allocator: Some("native".into()),
        }
    }

    /// Scenario B of the H200 reproduction: 8.79 GiB free in 18 MiB holes, 32 MiB left on
    /// the capped card, a 64 MiB request.
    fn scenario_b() -> FragInput {
        FragInput {
            free_total: 9000 * MIB_U64,
            largest_free: Some(18 * MIB_U64),
            device_avail: 32 * MIB_U64,
            request: 64 * MIB_U64,
            request_source: RequestSource::BlockMap,
        }
    }

    #[test]
    fn scenario_b_is_a_fragmentation_risk_with_pytorch_advice() {
        let f = risk(7, 0, &scenario_b(), &torch(), Some(3)).expect("risk");
        assert_eq!(f.key.kind, AlertKind::FragmentationRisk);
        assert!(
            f.message.contains("expandable_segments:True"),
            "{}",
            f.message
        );
        assert!(f.message.contains("largest hole is 18.0MiB"));
        assert!(f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX);
        assert_eq!(f.epoch, Some(3));
    }

    #[test]
    fn no_risk_when_a_hole_or_the_card_fits_or_total_is_short() {
        let mut i = scenario_b();
        i.largest_free = Some(64 * MIB_U64);
        assert!(risk(7, 0, &i, &torch(), None).is_none(), "a hole fits");
        let mut i = scenario_b();
        i.device_avail = 10 * GIB_U64;
        assert!(
            risk(7, 0, &i, &torch(), None).is_none(),
            "card fits (scenario A)"
        );
        let mut i = scenario_b();
        i.free_total = 40 * MIB_U64;
        assert!(
            risk(7, 0, &i, &torch(), None).is_none(),
            "plain shortage, not fragmentation"
        );
        let mut i = scenario_b();
        i.largest_free = None;
        assert!(
            risk(7, 0, &i, &torch(), None).is_none(),
            "L unknown: cannot decide"
        );
    }

    #[test]
    fn advice_names_each_frameworks_remedy() {
        let tf = Runtime {
            framework: "tensorflow".into(),
            allocator: Some("bfc".into()),
        };
        assert!(advice(&tf).contains("TF_GPU_ALLOCATOR=cuda_malloc_async"));
        assert!(advice(&tf).contains("memory_limit"));
        let es = Runtime {
            framework: "torch".into(),
            allocator: Some("expandable_segments".into()),
        };
        assert!(advice(&es).contains("already on"));
        assert!(advice(&Runtime::default()).contains("checkpoint"));
    }

    #[test]
    fn oom_with_enough_free_total_is_a_fragmentation_oom() {
        let ev = OomEvent {
            t: 1,
            requested: Some(64 * MIB_U64),
            free_total: Some(9000 * MIB_U64),
            largest_free: Some(18 * MIB_U64),
            device_free: Some(0),
            epoch: Some(5),
        };
        let f = oom(7, 0, &ev, &torch(), 1);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.message.contains("fragmentation OOM"));
        let plain = OomEvent {
            free_total: Some(10 * MIB_U64),
            ..ev
        };
        let f = oom(7, 0, &plain, &torch(), 2);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(f.message.contains("OOM number 2"));
        let unknown = OomEvent {
            free_total: None,
            ..ev
        };
        assert_eq!(oom(7, 0, &unknown, &torch(), 1).key.kind, AlertKind::Oom);
    }
}
