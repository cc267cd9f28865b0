//! OOM events the companion reported, as alerts that name their cause: fragmentation
//! (the memory was there, in pieces), a leak that ran the process into its ceiling, its
//! own allocator limit, or a card other processes filled.

use crate::fmt::{compact, human};

use super::format::{fit_summary, who};
use super::fragmentation::{advice, named};
use super::inputs::{OomEvent, Runtime};
use super::oom_math::{Binding, OomNumbers};
use super::{AlertKey, AlertKind, Basis, Evidence, Finding, Severity, StepUnit, ValueName};

/// A growth alert active on the process when its OOM arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct LeakNote {
    /// Epoch the growth alert was raised in.
    pub since_epoch: Option<u64>,
    /// Bytes per step and the step.
    pub rate: f64,
    pub unit: StepUnit,
    /// The growth was the working set's (each epoch's peak above its floor), not a leak.
    pub working_set: bool,
}

/// What the engine knows besides the event, so an OOM alert can name its cause.
#[derive(Debug, Clone, PartialEq)]
pub struct OomContext {
    pub leak: Option<LeakNote>,
    /// A fragmentation-risk alert active on the process when its OOM arrived: the epoch it
    /// was raised in (`None` when the rule ran without epochs).
    pub risk: Option<Option<u64>>,
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
            risk: None,
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
    /// Foreseen by the fragmentation-risk rule: the ceiling left no room for the request,
    /// so only a cached hole could serve it, and none fitted any more (split or pinned).
    CacheFit,
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
/// drove reserved to its ceiling (on the second alert corpus two curriculum runs whose buffer
/// grew each epoch died holding 2.9–3.4 × the request in holes of ~20 MiB; calling them
/// leak OOMs sent the user after a leak while `expandable_segments` was the fix). Then an
/// active leak: the leak ran the process into its ceiling. Then the ceiling it met.
pub fn oom_cause(ev: &OomEvent, ctx: &OomContext) -> OomCause {
    // The pieces must also be a real share of the cache: a leak that ran a run into its
    // cap leaves a few percent of reserved free, which can still be many times a small
    // request (the second corpus's held-out leaks died holding 2.6-9.5 x a 20-28 MiB request,
    // 3-10 % of reserved).
    let share_ok = |t: u64| {
        ev.reserved
            .is_none_or(|res| t as f64 >= ctx.min_free_share * res as f64)
    };
    let fragmented = matches!(
        (ev.free_total, ev.requested),
        (Some(t), Some(r)) if t >= r && t as f64 >= ctx.free_multiple * r as f64
            && ev.largest_free.is_none_or(|l| l < r) && share_ok(t)
    );
    let ceiling = ceiling_met(ev);
    // The mechanism the risk rule watches: a request that only a cached hole could
    // serve, and the hole gone. The free total may be below the request (an 8 MiB tensor
    // split a 640 MiB hole) or a minor share of the cache, so the rule above misses it.
    let hole_gone = matches!((ev.largest_free, ev.requested), (Some(l), Some(r)) if l < r);
    if fragmented {
        OomCause::Fragmentation
    } else if ctx.leak.is_some() {
        OomCause::Leak
    } else if ctx.risk.is_some()
        && hole_gone
        && matches!(ceiling, OomCause::Limit | OomCause::CardFull)
    {
        OomCause::CacheFit
    } else {
        ceiling
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

/// "leak" or "working set's growth", for the growth alert that preceded the OOM.
fn growth_noun(ctx: &OomContext) -> &'static str {
    if ctx.leak.as_ref().is_some_and(|l| l.working_set) {
        "working set's growth"
    } else {
        "growth"
    }
}

/// ", other processes held 137GiB (the largest, PID 600, 113GiB)".
fn others_words(ctx: &OomContext) -> String {
    match (ctx.others_held, ctx.largest_other) {
        (Some(h), Some((p, b))) if h > 0 => format!(
            ", other processes held {} (the largest, PID {p}, {})",
            compact(h),
            compact(b)
        ),
        _ => String::new(),
    }
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
            let others = others_words(ctx);
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

/// Why new memory could not serve the request: what the limit or the card left.
fn room_words(ev: &OomEvent, ctx: &OomContext) -> String {
    match (ceiling_met(ev), ev.limit, ev.reserved) {
        (OomCause::Limit, Some(l), Some(res)) => format!(
            "its allocator limit of {} left {} above what it had reserved",
            compact(l),
            compact(l.saturating_sub(res))
        ),
        _ => ceiling_words(ev, ctx),
    }
}

/// The event's numbers for the arithmetic a reader can check.
pub fn numbers(ev: &OomEvent, ctx: &OomContext) -> OomNumbers {
    OomNumbers {
        requested: ev.requested,
        free_total: ev.free_total,
        largest_free: ev.largest_free,
        device_free: ev.device_free,
        limit: ev.limit,
        reserved: ev.reserved,
        card_total: ctx.card_total,
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
    if let Some(t) = ctx.card_total {
        values.push(named(ValueName::CardTotal, t));
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
        (Some(t), Some(_))
            if t > 0
                && ev
                    .reserved
                    .is_some_and(|res| (t as f64) >= ctx.min_free_share * res as f64) =>
        {
            format!(
                " Its allocator held {} free{hole}, {:.0} % of what it had reserved, but no hole fitted the request.",
                compact(t),
                100.0 * t as f64 / ev.reserved.unwrap_or(t).max(1) as f64
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
    let nums = numbers(ev, ctx);
    // The failing moment first: which limit bound the request and the sums that show it,
    // then what the cache held against it; the cause and the remedy follow.
    let head = format!(
        "PID {pid} on GPU {gpu} ran out of memory{again} for {req_s}{}.",
        nums.sentence(&|v| compact(v))
            .map_or_else(String::new, |s| format!(", {s}"))
    );
    let at_cap = matches!(
        nums.binding(),
        Binding::Limit | Binding::LimitBetweenSamples
    );
    // The head has named the limit with its numbers; the cause says only which it was.
    let ceiling = match nums.binding() {
        Binding::Limit | Binding::LimitBetweenSamples => "its allocator limit".to_string(),
        Binding::Card => "the full card".to_string(),
        Binding::Unknown => format!("its ceiling; {}", ceiling_words(ev, ctx)),
    };
    let (kind, message, summary) = match cause {
        OomCause::Fragmentation => (
            AlertKind::FragmentationOom,
            format!(
                "{head} A fragmentation OOM: the memory was there but in pieces, {} free in its cache.{} {}",
                compact(ev.free_total.unwrap_or(0)),
                if ctx.leak.is_some() {
                    let (since, rate) = leak_words(ctx);
                    format!(
                        " The {} reported{since}{rate} is what filled the ceiling; fix it too.",
                        growth_noun(ctx)
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
        OomCause::CacheFit => {
            let r = req.unwrap_or(0);
            let l = ev.largest_free.unwrap_or(0);
            let foreseen = match ctx.risk {
                Some(Some(e)) => format!("As the fragmentation risk raised in epoch {e} foresaw"),
                _ => "As the fragmentation risk foresaw".to_string(),
            };
            let held = ev.free_total.map_or_else(String::new, |t| {
                format!(" The allocator held {} free in all.", compact(t))
            });
            (
                AlertKind::FragmentationOom,
                format!(
                    "{head} {foreseen}, {}, so only a cached hole could serve it, and none fitted any more: the largest, {}, was {} short (a smaller allocation split or pinned the hole the request used to take).{held} A fragmentation OOM, not a leak: the memory was there, in the wrong pieces. {}",
                    room_words(ev, ctx),
                    compact(l),
                    compact(r.saturating_sub(l)),
                    advice(rt)
                ),
                format!(
                    "{who_s} frag OOM: hole {} short",
                    compact(r.saturating_sub(l))
                ),
            )
        }
        OomCause::Leak if ctx.leak.as_ref().is_some_and(|l| l.working_set) => {
            let (since, rate) = leak_words(ctx);
            (
                AlertKind::Oom,
                format!(
                    "{head} The working set's growth reported{since}{rate} ran it into {}. Not a leak nor fragmentation: each epoch's peak needed more than the last.{pieces} Lower the step's peak (batch or sequence length, activation checkpointing) or raise the limit, then restart from a checkpoint.",
                    ceiling
                ),
                if at_cap {
                    format!("{who_s} peak OOM at cap{asked}")
                } else {
                    format!("{who_s} peak OOM{asked}")
                },
            )
        }
        OomCause::Leak => {
            let (since, rate) = leak_words(ctx);
            (
                AlertKind::Oom,
                format!(
                    "{head} The leak reported{since}{rate} ran it into {}. A leak OOM, not fragmentation.{pieces} Find what keeps tensors alive across epochs (accumulated losses, growing lists or caches), then restart from a checkpoint.",
                    ceiling
                ),
                if at_cap {
                    format!("{who_s} leak OOM at cap{asked}")
                } else {
                    format!("{who_s} leak OOM{asked}")
                },
            )
        }
        OomCause::CardFull => (
            AlertKind::Oom,
            format!(
                "{head} The card was full{}.{pieces} Give the run a card of its own, or have the other processes cap their memory (a grab-all allocator: memory growth or a memory limit).",
                others_words(ctx)
            ),
            format!("{who_s} OOM: card full{asked}"),
        ),
        OomCause::Limit => (
            AlertKind::Oom,
            format!(
                "{head}{pieces} The run needs a smaller peak (batch size, activation checkpointing) or a larger limit."
            ),
            format!("{who_s} OOM at its limit{asked}"),
        ),
        OomCause::Unknown if at_cap => (
            AlertKind::Oom,
            format!(
                "{head} The step's peak reserved more than the samples saw.{pieces} The run needs a smaller peak (batch size, activation checkpointing) or a larger limit."
            ),
            format!("{who_s} OOM at cap{asked}"),
        ),
        OomCause::Unknown => {
            let free = ev.device_free.map_or_else(String::new, |d| {
                format!(" The card had {} free.", compact(d))
            });
            (
                AlertKind::Oom,
                format!(
                    "{head}{free} The run needs a smaller peak (batch size, activation checkpointing) or a larger share of the card."
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
        let f = oom(7, 0, &ev, &Runtime::torch_native(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.message.contains("fragmentation OOM"));
        let plain = OomEvent {
            free_total: Some(10 * MIB_U64),
            ..ev
        };
        let f = oom(7, 0, &plain, &Runtime::torch_native(), 2, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(f.message.contains("OOM number 2"));
        let unknown = OomEvent {
            free_total: None,
            ..ev
        };
        assert_eq!(
            oom(7, 0, &unknown, &Runtime::torch_native(), 1, &ctx)
                .key
                .kind,
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
        let f = oom(784, 1, &ev, &Runtime::torch_native(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(
            f.message
                .contains("bound by the card: 187MiB free on it < 256MiB asked"),
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
                working_set: false,
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
        let f = oom(789, 1, &frag, &Runtime::torch_native(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        assert!(
            f.message.contains("growth reported since epoch 13"),
            "{}",
            f.message
        );
        let f = oom(789, 1, &slack, &Runtime::torch_native(), 1, &ctx);
        assert_eq!(f.key.kind, AlertKind::Oom);
        assert!(
            f.message
                .contains("leak reported since epoch 13 (+32.0 MiB per epoch)"),
            "{}",
            f.message
        );
        assert!(f.message.contains("not fragmentation"));
        assert!(f.summary.contains("leak OOM"), "{}", f.summary);
        // A growing working set is not called a leak at its OOM.
        let ws = OomContext {
            leak: ctx.leak.clone().map(|l| LeakNote {
                working_set: true,
                ..l
            }),
            ..ctx.clone()
        };
        let f = oom(789, 1, &slack, &Runtime::torch_native(), 1, &ws);
        assert!(
            f.message
                .contains("The working set's growth reported since epoch 13"),
            "{}",
            f.message
        );
        assert!(!f.message.contains("leak reported"), "{}", f.message);
        assert!(!f.message.contains("leak OOM"), "{}", f.message);
        assert!(f.summary.contains("peak OOM"), "{}", f.summary);
        let at_limit = OomEvent {
            reserved: Some(2900 * MIB_U64),
            device_free: Some(10 * GIB_U64),
            ..card_full()
        };
        let ctx = OomContext::default();
        assert_eq!(oom_cause(&at_limit, &ctx), OomCause::Limit);
        let f = oom(784, 1, &at_limit, &Runtime::torch_native(), 1, &ctx);
        assert!(
            f.message.contains("allocator limit of 3.00GiB"),
            "{}",
            f.message
        );
    }

    /// corpus3's frag_ownhole (PID 779): a 640 MiB request under a cap that left 320 MiB,
    /// its hole split by an 8 MiB tensor. With the risk alert active it is a fragmentation
    /// OOM that says so; without it, the limit it met, and not "a small share ... growth".
    #[test]
    fn a_foreseen_hole_that_no_longer_fits_is_a_fragmentation_oom() {
        let ev = OomEvent {
            requested: Some(640 * MIB_U64),
            free_total: Some(632 * MIB_U64),
            largest_free: Some(632 * MIB_U64),
            reserved: Some(1410 * MIB_U64),
            limit: Some(1730 * MIB_U64),
            device_free: Some(115 * GIB_U64),
            ..OomEvent::default()
        };
        let plain = OomContext::default();
        assert_eq!(oom_cause(&ev, &plain), OomCause::Limit);
        let f = oom(779, 0, &ev, &Runtime::torch_native(), 1, &plain);
        assert!(!f.message.contains("small share"), "{}", f.message);
        assert!(
            f.message.contains("45 % of what it had reserved"),
            "{}",
            f.message
        );
        let foreseen = OomContext {
            risk: Some(Some(4)),
            ..OomContext::default()
        };
        assert_eq!(oom_cause(&ev, &foreseen), OomCause::CacheFit);
        let f = oom(779, 0, &ev, &Runtime::torch_native(), 1, &foreseen);
        assert_eq!(f.key.kind, AlertKind::FragmentationOom);
        for words in [
            "raised in epoch 4",
            "left 320MiB above what it had reserved",
            "632MiB, was 8.00MiB short",
            "expandable_segments:True",
        ] {
            assert!(f.message.contains(words), "{words}: {}", f.message);
        }
        assert_eq!(f.summary, "779@0 frag OOM: hole 8.00MiB short");
        // A hole that still fits is not this mechanism, nor is an active leak's OOM.
        let fits = OomEvent {
            largest_free: Some(700 * MIB_U64),
            ..ev
        };
        assert_eq!(oom_cause(&fits, &foreseen), OomCause::Limit);
        let leaking = OomContext {
            leak: Some(LeakNote {
                since_epoch: Some(3),
                rate: 8.0 * MIB_U64 as f64,
                unit: StepUnit::Epoch,
                working_set: false,
            }),
            ..foreseen
        };
        assert_eq!(oom_cause(&ev, &leaking), OomCause::Leak);
    }
}
