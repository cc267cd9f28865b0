//! Fragmentation risk (T ≥ R > max(L, D)) and OOM events, with advice that names the
//! framework's own remedy. See instrumentation research §8.4 and docs/alerts.md.

use crate::fmt::human;
use crate::model::allocator::frag_index;
use crate::model::named::Framework;

use super::format::{fit_summary, who};
use super::inputs::{OomEvent, Runtime};
use super::{
    AlertKey, AlertKind, Basis, Evidence, Finding, Gate, GateName, Named, Severity, StepUnit,
    ValueName,
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
}

impl RequestSource {
    pub fn words(self) -> &'static str {
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
    match rt.framework {
        Framework::Torch if alloc == "expandable_segments" => "Expandable segments are already on, so live tensors pin the holes: restart from a checkpoint and lower the peak (smaller batch, activation checkpointing) or free long-lived tensors between steps.".into(),
        Framework::Torch => "Remedy: restart from a checkpoint with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows segments in place instead of splitting fixed ones.".into(),
        Framework::Tensorflow => "Remedy: restart from a checkpoint with TF_GPU_ALLOCATOR=cuda_malloc_async, or give the BFC allocator a fixed memory_limit.".into(),
        Framework::Jax => "Remedy: restart from a checkpoint; XLA's pool cannot be compacted, but XLA_PYTHON_CLIENT_ALLOCATOR=platform avoids pooling (slower) and a larger XLA_PYTHON_CLIENT_MEM_FRACTION gives it more room.".into(),
        _ => "Remedy: restart from a checkpoint; a caching allocator cannot compact its cache while tensors are alive.".into(),
    }
}

fn named(name: ValueName, bytes: u64) -> Named {
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

/// A growth alert active on the process when its OOM arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct LeakNote {
    /// Epoch the growth alert was raised in.
    pub since_epoch: Option<u64>,
    /// Bytes per step and the step.
    pub rate: f64,
    pub unit: StepUnit,
}

/// What the engine knows besides the event, so an OOM alert can name its cause.
#[derive(Debug, Clone, PartialEq)]
pub struct OomContext {
    pub leak: Option<LeakNote>,
    /// NVML usage of the other processes on the card, and the largest of them (pid, bytes).
    pub others_held: Option<u64>,
    pub largest_other: Option<(u32, u64)>,
    pub card_total: Option<u64>,
    /// `fragmentation.oom_free_multiple`.
    pub free_multiple: f64,
    /// `fragmentation.min_free_share`.
    pub min_free_share: f64,
}

/// The configured defaults without a config, for the rule's unit tests.
#[cfg(test)]
impl Default for OomContext {
    fn default() -> Self {
        OomContext {
            leak: None,
            others_held: None,
            largest_other: None,
            card_total: None,
            free_multiple: 2.0,
            min_free_share: 0.3,
        }
    }
}

/// Why an OOM happened, in the order the alert reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OomCause {
    /// A growth alert was active: the leak ran the process into its ceiling.
    Leak,
    /// The allocator held several times the request free, in pieces.
    Fragmentation,
    /// The allocator limit left less than the request.
    Limit,
    /// The card had less free than the request while the limit had room.
    CardFull,
    /// Not enough is known to say which ceiling it was.
    Unknown,
}

/// Which ceiling the failing request met: its own limit, or the card.
fn ceiling_met(ev: &OomEvent) -> OomCause {
    let Some(r) = ev.requested else {
        return OomCause::Unknown;
    };
    let limit_left = match (ev.limit, ev.reserved) {
        (Some(l), Some(res)) => Some(l.saturating_sub(res)),
        _ => None,
    };
    match (limit_left, ev.device_free) {
        (Some(left), _) if left < r => OomCause::Limit,
        (_, Some(d)) if d < r => OomCause::CardFull,
        _ => OomCause::Unknown,
    }
}

/// The cause of an OOM. Fragmentation first: the cache held `free_multiple` × the request
/// free and (when known) no hole fitted it, so the memory was there but in pieces, whatever
/// drove reserved to its ceiling (on the issue-13 corpus two curriculum runs whose buffer
/// grew each epoch died holding 2.9–3.4 × the request in holes of ~20 MiB; calling them
/// leak OOMs sent the user after a leak while `expandable_segments` was the fix). Then an
/// active leak: the leak ran the process into its ceiling. Then the ceiling it met.
pub fn oom_cause(ev: &OomEvent, ctx: &OomContext) -> OomCause {
    // The pieces must also be a real share of the cache: a leak that ran a run into its
    // cap leaves a few percent of reserved free, which can still be many times a small
    // request (the issue-13 held-out leaks died holding 2.6-9.5 x a 20-28 MiB request, 3-10 %
    // of reserved).
    let share_ok = |t: u64| {
        ev.reserved
            .is_none_or(|res| t as f64 >= ctx.min_free_share * res as f64)
    };
    let fragmented = matches!(
        (ev.free_total, ev.requested),
        (Some(t), Some(r)) if t >= r && t as f64 >= ctx.free_multiple * r as f64
            && ev.largest_free.is_none_or(|l| l < r) && share_ok(t)
    );
    if fragmented {
        OomCause::Fragmentation
    } else if ctx.leak.is_some() {
        OomCause::Leak
    } else {
        ceiling_met(ev)
    }
}

/// " The growth reported since epoch 7 (+24.0 MiB per epoch) ..." for an active leak.
fn leak_words(ctx: &OomContext) -> (String, String) {
    let leak = ctx.leak.as_ref();
    let since = leak
        .and_then(|l| l.since_epoch)
        .map_or_else(String::new, |e| format!(" since epoch {e}"));
    let rate = leak.map_or_else(String::new, |l| {
        format!(" (+{} per {})", human(l.rate.max(0.0) as u64), l.unit)
    });
    (since, rate)
}

fn ceiling_words(ev: &OomEvent, ctx: &OomContext) -> String {
    match ceiling_met(ev) {
        OomCause::Limit => format!(
            "it reached its allocator limit of {}{}",
            compact(ev.limit.unwrap_or(0)),
            ev.reserved
                .map_or_else(String::new, |r| format!(" (reserved {})", compact(r)))
        ),
        OomCause::CardFull => {
            let total = ctx
                .card_total
                .map_or_else(String::new, |t| format!(" of {}", compact(t)));
            let others = match (ctx.others_held, ctx.largest_other) {
                (Some(h), Some((p, b))) if h > 0 => format!(
                    ", other processes held {} (the largest, PID {p}, {})",
                    compact(h),
                    compact(b)
                ),
                _ => String::new(),
            };
            let own = ev.limit.map_or_else(String::new, |l| {
                format!(", while its own limit of {} had room", compact(l))
            });
            format!(
                "the card was full: {} free{total}{others}{own}",
                compact(ev.device_free.unwrap_or(0))
            )
        }
        _ => "it ran out of memory".into(),
    }
}

/// An OOM event, reported with its cause (`oom_cause`): `FragmentationOom` when the cache
/// held several times the request in pieces, `Oom` otherwise, saying which ceiling it met
/// and whether an active leak drove it there. `count` OOMs so far.
pub fn oom(
    pid: u32,
    gpu: u32,
    ev: &OomEvent,
    rt: &Runtime,
    count: u32,
    ctx: &OomContext,
) -> Finding {
    let req = ev.requested;
    let cause = oom_cause(ev, ctx);
    let req_s = req.map_or_else(
        || "an allocation".to_string(),
        |r| format!("a {} request", compact(r)),
    );
    let mut values = Vec::new();
    if let Some(r) = req {
        values.push(named(ValueName::Requested, r));
    }
    if let Some(t) = ev.free_total {
        values.push(named(ValueName::FreeInCache, t));
    }
    if let Some(l) = ev.largest_free {
        values.push(named(ValueName::LargestHole, l));
    }
    if let Some(d) = ev.device_free {
        values.push(named(ValueName::CardFree, d));
    }
    if let Some(res) = ev.reserved {
        values.push(named(ValueName::Reserved, res));
    }
    if let Some(l) = ev.limit {
        values.push(named(ValueName::AllocatorLimit, l));
    }
    if let Some(h) = ctx.others_held {
        values.push(named(ValueName::OtherProcesses, h));
    }
    let again = if count > 1 {
        format!(" (OOM number {count})")
    } else {
        String::new()
    };
    let hole = ev
        .largest_free
        .map_or_else(String::new, |l| format!(", largest hole {}", compact(l)));
    // What the cache held, for the causes other than fragmentation.
    let pieces = match (ev.free_total, req) {
        (Some(t), Some(r)) if t >= r && (t as f64) < ctx.free_multiple * r as f64 => {
            format!(
                " Its allocator held {} free in pieces{hole}: less than {} × the request, the usual slack of a caching allocator, so compacting it would have served this request and not the next.",
                compact(t),
                ctx.free_multiple
            )
        }
        (Some(t), Some(_)) if t > 0 => format!(
            " Its allocator held {} free in pieces{hole}, a small share of what it had reserved: the slack left when the growth reached the ceiling.",
            compact(t)
        ),
        (Some(t), _) => format!(" Its allocator held only {} free.", compact(t)),
        (None, _) => String::new(),
    };
    let who_s = who(Some(pid), gpu);
    let asked = req.map_or_else(String::new, |r| format!(" asking {}", compact(r)));
    let (kind, message, summary) = match cause {
        OomCause::Fragmentation => (
            AlertKind::FragmentationOom,
            format!(
                "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s} while its allocator held {} free{hole}: a fragmentation OOM, the memory was there but in pieces.{} {}",
                compact(ev.free_total.unwrap_or(0)),
                if ctx.leak.is_some() {
                    let (since, rate) = leak_words(ctx);
                    format!(
                        " The growth reported{since}{rate} is what filled the ceiling; fix it too."
                    )
                } else {
                    String::new()
                },
                advice(rt)
            ),
            format!(
                "{who_s} frag OOM: {} in pieces",
                compact(ev.free_total.unwrap_or(0))
            ),
        ),
        OomCause::Leak => {
            let (since, rate) = leak_words(ctx);
            (
                AlertKind::Oom,
                format!(
                    "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}: the leak reported{since}{rate} ran it into its ceiling; {}. A leak OOM, not fragmentation.{pieces} Find what keeps tensors alive across epochs (accumulated losses, growing lists or caches), then restart from a checkpoint.",
                    ceiling_words(ev, ctx)
                ),
                format!("{who_s} leak OOM{asked}"),
            )
        }
        OomCause::CardFull => (
            AlertKind::Oom,
            format!(
                "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}: {}.{pieces} Give the run a card of its own, or have the other processes cap their memory (a grab-all allocator: memory growth or a memory limit).",
                ceiling_words(ev, ctx)
            ),
            format!("{who_s} OOM: card full{asked}"),
        ),
        OomCause::Limit => (
            AlertKind::Oom,
            format!(
                "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}: {}.{pieces} The run needs a smaller peak (batch size, activation checkpointing) or a larger limit.",
                ceiling_words(ev, ctx)
            ),
            format!("{who_s} OOM at its limit{asked}"),
        ),
        OomCause::Unknown => {
            let free = match (ev.free_total, ev.device_free) {
                (Some(t), Some(d)) => format!(
                    "; the allocator held {} free and the card {}",
                    compact(t),
                    compact(d)
                ),
                (Some(t), None) => format!("; the allocator held {} free", compact(t)),
                (None, Some(d)) => format!("; the card had {} free", compact(d)),
                (None, None) => String::new(),
            };
            (
                AlertKind::Oom,
                format!(
                    "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}{free}. The run needs a smaller peak (batch size, activation checkpointing) or a larger share of the card."
                ),
                format!("{who_s} OOM{asked}"),
            )
        }
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
    use crate::fmt::{GIB_U64, MIB_U64};

    fn torch() -> Runtime {
        Runtime {
            framework: Framework::Torch,
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

    #[test]
    fn oom_with_enough_free_total_is_a_fragmentation_oom() {
        let ev = OomEvent {
            t: 1,
            requested: Some(64 * MIB_U64),
            free_total: Some(9000 * MIB_U64),
            largest_free: Some(18 * MIB_U64),
            device_free: Some(0),
            epoch: Some(5),
            ..OomEvent::default()
        };
        let ctx = OomContext::default();
        let f = oom(7, 0, &ev, &torch(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.message.contains("fragmentation OOM"));
        let plain = OomEvent {
            free_total: Some(10 * MIB_U64),
            ..ev
        };
        let f = oom(7, 0, &plain, &torch(), 2, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(f.message.contains("OOM number 2"));
        let unknown = OomEvent {
            free_total: None,
            ..ev
        };
        assert_eq!(
            oom(7, 0, &unknown, &torch(), 1, &ctx).key.kind,
            AlertKind::Oom
        );
    }

    /// The clean_unfreeze OOM of the H200 corpus: 256 MiB asked, 328 MiB free in the
    /// cache (largest hole 176 MiB), 187 MiB free on a card other processes had filled,
    /// 1.3 GiB left under its own 3 GiB limit.
    fn card_full() -> OomEvent {
        OomEvent {
            t: 1,
            requested: Some(256 * MIB_U64),
            free_total: Some(328 * MIB_U64),
            largest_free: Some(176 * MIB_U64),
            device_free: Some(187 * MIB_U64),
            limit: Some(3 * GIB_U64),
            reserved: Some(1734 * MIB_U64),
            epoch: Some(19),
        }
    }

    #[test]
    fn normal_cache_slack_at_a_full_card_is_a_card_oom_not_fragmentation() {
        let ctx = OomContext {
            others_held: Some(137 * GIB_U64),
            largest_other: Some((600, 113 * GIB_U64)),
            card_total: Some(140 * GIB_U64),
            ..OomContext::default()
        };
        let ev = card_full();
        assert_eq!(oom_cause(&ev, &ctx), OomCause::CardFull);
        let f = oom(784, 1, &ev, &torch(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(
            f.message
                .contains("the card was full: 187MiB free of 140GiB"),
            "{}",
            f.message
        );
        assert!(f.message.contains("PID 600"), "{}", f.message);
        assert!(f.message.contains("328MiB free in pieces"), "{}", f.message);
        assert!(!f.message.contains("expandable_segments"), "{}", f.message);
        assert!(f.summary.contains("card full"), "{}", f.summary);
        // Twice the request but under 30 % of reserved is still slack (29.5 % here)...
        let slack = OomEvent {
            free_total: Some(512 * MIB_U64),
            ..ev
        };
        assert_eq!(oom_cause(&slack, &ctx), OomCause::CardFull);
        // ...a third of the cache free in pieces is fragmentation, whatever the card.
        let frag = OomEvent {
            free_total: Some(640 * MIB_U64),
            ..ev
        };
        assert_eq!(oom_cause(&frag, &ctx), OomCause::Fragmentation);
    }

    #[test]
    fn an_active_leak_makes_it_a_leak_oom_and_a_spent_limit_is_named() {
        let ctx = OomContext {
            leak: Some(LeakNote {
                since_epoch: Some(13),
                rate: 32.0 * MIB_U64 as f64,
                unit: StepUnit::Epoch,
            }),
            ..OomContext::default()
        };
        // the cache's normal slack (1.5 × the request): the leak's OOM
        let slack = OomEvent {
            free_total: Some(384 * MIB_U64),
            ..card_full()
        };
        assert_eq!(oom_cause(&slack, &ctx), OomCause::Leak);
        // several times the request free, no hole fits: fragmentation, naming the growth
        let frag = OomEvent {
            free_total: Some(2 * GIB_U64),
            largest_free: Some(20 * MIB_U64),
            ..card_full()
        };
        assert_eq!(oom_cause(&frag, &ctx), OomCause::Fragmentation);
        let f = oom(789, 1, &frag, &torch(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        assert!(
            f.message.contains("growth reported since epoch 13"),
            "{}",
            f.message
        );
        let f = oom(789, 1, &slack, &torch(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(
            f.message
                .contains("leak reported since epoch 13 (+32.0 MiB per epoch)"),
            "{}",
            f.message
        );
        assert!(f.message.contains("not fragmentation"));
        assert!(f.summary.contains("leak OOM"), "{}", f.summary);
        let at_limit = OomEvent {
            reserved: Some(2900 * MIB_U64),
            device_free: Some(10 * GIB_U64),
            ..card_full()
        };
        let ctx = OomContext::default();
        assert_eq!(oom_cause(&at_limit, &ctx), OomCause::Limit);
        let f = oom(784, 1, &at_limit, &torch(), 1, &ctx);
        assert!(
            f.message.contains("allocator limit of 3.00GiB"),
            "{}",
            f.message
        );
    }
}
