//! Fragmentation risk (T ≥ R > max(L, D)), with advice that names the framework's own
//! remedy (which the OOM and retry rules give too). See instrumentation research §8.4
//! and docs/alerts.md.

use crate::model::allocator::frag_index;
use crate::model::named::Framework;

use super::format::{fit_summary, who};
use super::inputs::Runtime;
use super::{
    AlertKey, AlertKind, Basis, Evidence, Finding, Gate, GateName, Named, Severity, ValueName,
};
use crate::fmt::compact;

/// Where R, the workload's largest request, was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestSource {
    /// The allocator's largest-allocation counter (JAX `largest_alloc_size`, companion `largest_alloc`).
    AllocCounter,
    /// The largest live block in the last block map.
    BlockMap,
    /// The request of the last OOM.
    LastOom,
    /// The largest size the companion saw allocated anew in several block maps.
    Recurring,
}

impl RequestSource {
    pub fn words(self) -> &'static str {
        match self {
            RequestSource::AllocCounter => "the largest allocation this run has made",
            RequestSource::BlockMap => "the largest block in the last snapshot",
            RequestSource::LastOom => "the request of the last OOM",
            RequestSource::Recurring => "a request the program makes again and again",
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
    match rt.framework {
        Framework::Torch if alloc == "expandable_segments" => "Expandable segments are already on, so live tensors pin the holes: restart from a checkpoint and lower the peak (smaller batch, activation checkpointing) or free long-lived tensors between steps.".into(),
        Framework::Torch => "Remedy: restart from a checkpoint with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows segments in place instead of splitting fixed ones.".into(),
        Framework::Tensorflow => "Remedy: restart from a checkpoint with TF_GPU_ALLOCATOR=cuda_malloc_async, or give the BFC allocator a fixed memory_limit.".into(),
        Framework::Jax => "Remedy: restart from a checkpoint; XLA's pool cannot be compacted, but XLA_PYTHON_CLIENT_ALLOCATOR=platform avoids pooling (slower) and a larger XLA_PYTHON_CLIENT_MEM_FRACTION gives it more room.".into(),
        _ => "Remedy: restart from a checkpoint; a caching allocator cannot compact its cache while tensors are alive.".into(),
    }
}

pub(super) fn named(name: ValueName, bytes: u64) -> Named {
    Named { name, bytes }
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
    // F as the allocator panel and the exporter compute it. Its clamp to 0..1 acts only
    // when L > T (possible elsewhere: JAX's T is reserved − allocated, its L a separate
    // counter), never here: the rule got this far with L < R ≤ T, so F = 1 − L/T.
    let f_index = frag_index(t, Some(l)).unwrap_or_default();
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
                named(ValueName::FreeInCache, t),
                named(ValueName::LargestHole, l),
                named(ValueName::FromCard, d),
                named(ValueName::LargestRequest, r),
            ],
            gates: vec![
                Gate {
                    name: GateName::FitsTotal,
                    value: t as f64,
                    threshold: r as f64,
                    passed: fits_total,
                },
                Gate {
                    name: GateName::FitsNoHole,
                    value: r as f64,
                    threshold: l.max(d) as f64,
                    passed: fits_nowhere,
                },
                Gate {
                    name: GateName::FragIndex,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::{GIB_U64, MIB_U64};

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
        let f = risk(7, 0, &scenario_b(), &Runtime::torch_native(), Some(3)).expect("risk");
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
        assert!(
            risk(7, 0, &i, &Runtime::torch_native(), None).is_none(),
            "a hole fits"
        );
        let mut i = scenario_b();
        i.device_avail = 10 * GIB_U64;
        assert!(
            risk(7, 0, &i, &Runtime::torch_native(), None).is_none(),
            "card fits (scenario A)"
        );
        let mut i = scenario_b();
        i.free_total = 40 * MIB_U64;
        assert!(
            risk(7, 0, &i, &Runtime::torch_native(), None).is_none(),
            "plain shortage, not fragmentation"
        );
        let mut i = scenario_b();
        i.largest_free = None;
        assert!(
            risk(7, 0, &i, &Runtime::torch_native(), None).is_none(),
            "L unknown: cannot decide"
        );
    }

    /// The rule's own F was 1 − L/T (0 for T = 0); the shared one clamps. Wherever the rule
    /// reports F (L < R ≤ T) the two agree to the bit, huge counts included.
    #[test]
    fn shared_frag_index_equals_the_rules_old_formula_where_it_is_reported() {
        let old = |t: u64, l: u64| {
            if t > 0 {
                1.0 - l as f64 / t as f64
            } else {
                0.0
            }
        };
        let cases = [
            (9000 * MIB_U64, 18 * MIB_U64),
            (64 * MIB_U64, 0),
            (64 * MIB_U64, 64 * MIB_U64 - 1),
            (1, 0),
            (3, 2),
            ((1 << 60) + 1, 1 << 60),
            (u64::MAX, u64::MAX - 1),
        ];
        for (t, l) in cases {
            let r = l + 1;
            let i = FragInput {
                free_total: t,
                largest_free: Some(l),
                device_avail: 0,
                request: r,
                request_source: RequestSource::AllocCounter,
            };
            let f = risk(1, 0, &i, &Runtime::default(), None).expect("L < R ≤ T is a risk");
            let gate = f
                .evidence
                .gates
                .iter()
                .find(|g| g.name == GateName::FragIndex)
                .expect("F reported");
            assert_eq!(gate.value.to_bits(), old(t, l).to_bits(), "T {t} L {l}");
        }
    }

    #[test]
    fn advice_names_each_frameworks_remedy() {
        let tf = Runtime {
            framework: Framework::Tensorflow,
            allocator: Some("bfc".into()),
        };
        assert!(advice(&tf).contains("TF_GPU_ALLOCATOR=cuda_malloc_async"));
        assert!(advice(&tf).contains("memory_limit"));
        let es = Runtime {
            framework: Framework::Torch,
            allocator: Some("expandable_segments".into()),
        };
        assert!(advice(&es).contains("already on"));
        assert!(advice(&Runtime::default()).contains("checkpoint"));
    }
}
