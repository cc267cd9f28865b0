//! Fragmentation risk from its mechanism: a request the program makes
//! again and again (a step's buffer, an activation) and how it can be served. Under an
//! allocator limit (PyTorch's memory fraction, a pool) that leaves less than the request
//! above what is reserved, it can come only from a cached hole. While holes that fit are
//! spare the run is safe; when it fits only the holes its own copies left (the block it
//! freed the step before), one tensor landing in such a hole is an OOM from
//! fragmentation, with the cache mostly free and often without a single allocator retry
//! before it. Both fragmentation OOMs of the third alert corpus sat in that state for 30 and
//! more epochs (a 640 MiB and a 256 MiB request, each fitting one hole of exactly its size).
//!
//! Warning when the holes that fit are few (at most one spare beyond what a step needs at
//! once) or fit with little margin, even none; never critical, since a run can sit at zero
//! margin for hundreds of epochs. Retries are not required. Expandable segments map pages into one segment, so a
//! request needs no contiguous cached hole there and the rule stays silent.

use crate::fmt::{MIB_U64, compact};
use crate::model::allocator::frag_index;
use crate::model::named::Framework;

use super::config::FragConfig;
use super::format::{fit_summary, who};
use super::fragmentation::named;
use super::inputs::{FragView, Runtime};
use super::{AlertKey, AlertKind, Basis, Evidence, Finding, Gate, GateName, Severity, ValueName};

/// Where the recurring request was learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recurrence {
    /// The companion saw the size allocated anew in `times` block maps (`requests`).
    Companion,
    /// The largest live block came and went `times` times (older companions).
    LargestBlock,
    /// Never seen alive: a free block of exactly its size stood in each of the last
    /// `times` block maps (the hole its own transient copy leaves, made and freed within
    /// a step, as a large buffer or a one-shot gather is).
    FreedHole,
}

/// Fewest block maps a freed hole must recur in before it counts as a request's, out of
/// the newest `HOLE_SPAN` (a map read while the request is alive lacks its hole).
pub const HOLE_MAPS: usize = 3;
pub const HOLE_SPAN: usize = 6;

/// The largest free block size present, exactly, among the largest free blocks of at
/// least `HOLE_MAPS` of the newest block maps, with how many. A transient request is never
/// alive when a map is read, so its trace is this hole; the room check (`room < R`) keeps
/// it to runs where only the cache could serve it again.
pub fn recurring_hole<'a>(free_tops: impl Iterator<Item = &'a [u64]>) -> Option<(u64, u64)> {
    let tops: Vec<&[u64]> = free_tops.collect();
    let mut sizes: Vec<u64> = tops.iter().flat_map(|t| t.iter().copied()).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    sizes.into_iter().find_map(|s| {
        let n = tops.iter().filter(|t| t.contains(&s)).count();
        (n >= HOLE_MAPS && s > 0).then_some((s, n as u64))
    })
}

/// How a recurring request can be served now, over the block maps of the last two epochs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitInput {
    /// R: the recurring request (a block size).
    pub request: u64,
    pub times: u64,
    pub recurrence: Recurrence,
    /// D: what new memory can still give (the limit less reserved, and the card's free).
    pub room: u64,
    pub limit: Option<u64>,
    pub reserved: u64,
    /// T, L now.
    pub free_total: u64,
    pub largest_free: Option<u64>,
    /// The most holes R could be served from at any reading of the span (free blocks of
    /// at least R, and the blocks its live copies will leave).
    pub holes: u64,
    /// Copies of R live at once at the step's peak (at least 1).
    pub need: u64,
    /// The widest margin of the tightest hole a step needs (the `need`-th largest fitting
    /// one) at any reading of the span, when known.
    pub margin: Option<u64>,
    /// Holes counted from exact sizes (`free_top`), not from log2 buckets.
    pub exact: bool,
}

/// Holes R could use at one reading: `(holes, need, margin)`. `None` when the reading says
/// nothing about holes of that size.
pub fn read_fit(r: u64, f: &FragView) -> Option<(u64, u64, Option<u64>, bool)> {
    let live_r = f.live_top.iter().filter(|&&s| s == r).count() as u64;
    if !f.free_top.is_empty() || !f.live_top.is_empty() {
        let mut cands: Vec<u64> = f.free_top.iter().copied().filter(|&s| s >= r).collect();
        cands.extend(std::iter::repeat_n(r, live_r as usize));
        cands.sort_unstable_by(|a, b| b.cmp(a));
        let need = live_r.max(1);
        let margin = cands.get(need as usize - 1).map(|h| h - r);
        return Some((cands.len() as u64, need, margin, true));
    }
    // An older companion: log2 buckets of free blocks. Every block of R's bucket or above
    // may fit (an upper bound, so the rule stays on the quiet side); L's margin is exact
    // when L is the only candidate.
    let hist = f.hist.as_ref()?;
    let b = 63 - r.max(1).leading_zeros();
    let upper: u64 = hist.iter().filter(|h| h.0 >= b).map(|h| h.1).sum();
    let own = u64::from(f.largest_block == Some(r));
    let l = f.largest_free?;
    let margin = (upper == 1 && l >= r)
        .then(|| l - r)
        .or((upper == 0 && own == 1).then_some(0));
    Some((upper + own, 1, margin, false))
}

/// `max_split_size_mb` that keeps tensors smaller than R out of R-sized holes: the largest
/// multiple of 64 MiB below R (PyTorch's floor is 20).
fn split_mb(r: u64) -> u64 {
    let mb = r / MIB_U64;
    (mb.saturating_sub(1) / 64 * 64).max(20)
}

fn remedies(rt: &Runtime, r: u64) -> String {
    match rt.framework {
        Framework::Torch => format!(
            "Remedies: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place, no hole needs to be contiguous), or max_split_size_mb:{} so that smaller tensors stop splitting {}-sized holes, or room above reserved: a higher memory cap or a smaller batch.",
            split_mb(r),
            compact(r)
        ),
        _ => format!(
            "{} Room above what is reserved (a higher limit, a smaller batch) also serves it.",
            super::fragmentation::advice(rt)
        ),
    }
}

pub fn check(
    pid: u32,
    gpu: u32,
    i: &FitInput,
    rt: &Runtime,
    cfg: &FragConfig,
    epoch: Option<u64>,
) -> Option<Finding> {
    if rt.allocator.as_deref() == Some("expandable_segments") {
        return None;
    }
    let r = i.request;
    if r == 0 || i.room >= r || i.holes == 0 || i.times < 2 {
        return None;
    }
    let spare = i.holes.saturating_sub(i.need);
    let just = (cfg.just_fit_frac * r as f64).max(cfg.just_fit_bytes as f64);
    let just_fits = i.margin.is_some_and(|m| (m as f64) < just);
    // A warning, never critical: on the H200 two runs sat with no spare hole and zero
    // margin for 300 and 1,000 epochs and never ran out, while the ones that did ran out in
    // the step a tensor landed in the hole, with nothing to see before. The warning says
    // how close the run is; it does not say the OOM is likely.
    if !(spare <= cfg.few_spare_holes || just_fits) {
        return None;
    }
    let severity = Severity::Warning;
    let learnt = match i.recurrence {
        Recurrence::Companion => format!("allocated anew {} times", i.times),
        Recurrence::LargestBlock => {
            format!("its largest block, seen come and go {} times", i.times)
        }
        Recurrence::FreedHole => format!(
            "never alive when a block map is read: made and freed within a step, it leaves a free block of exactly its size, seen in {} of the last maps",
            i.times
        ),
    };
    let room = match i.limit {
        Some(l) => format!(
            "its limit of {} less the {} reserved leaves {}",
            compact(l),
            compact(i.reserved),
            compact(i.room)
        ),
        None => format!("the card has {} free", compact(i.room)),
    };
    let need = if i.need > 1 {
        format!("needs {} of them at once and ", i.need)
    } else {
        String::new()
    };
    let holes = match (i.holes, i.exact) {
        (1, _) => "1 cached hole".to_string(),
        (n, true) => format!("{n} cached holes"),
        (n, false) => format!("at most {n} cached holes"),
    };
    let margin = match i.margin {
        Some(0) => ", of exactly its size".to_string(),
        Some(m) => format!(", the one it needs {} larger than it", compact(m)),
        None => String::new(),
    };
    let outlook = if spare == 0 {
        "the next tensor that lands in that hole makes the next request an OOM from fragmentation, with the cache mostly free"
    } else {
        "one or two tensors landing in those holes leave it none: an OOM from fragmentation"
    };
    let message = format!(
        "PID {pid} on GPU {gpu}: its recurring {} request ({learnt}) cannot come from new memory ({room}), so only the cache can serve it; it {need}fits {holes}{margin}: {outlook}. {}",
        compact(r),
        remedies(rt, r)
    );
    let summary = format!(
        "{} {} fits {} hole{}{}",
        who(Some(pid), gpu),
        compact(r),
        i.holes,
        if i.holes == 1 { "" } else { "s" },
        match i.margin {
            Some(m) if just_fits => format!(" +{}", compact(m)),
            _ => String::new(),
        }
    );
    let mut values = vec![
        named(ValueName::RecurringRequest, r),
        named(ValueName::FromCard, i.room),
        named(ValueName::FreeInCache, i.free_total),
        named(ValueName::Reserved, i.reserved),
    ];
    if let Some(l) = i.limit {
        values.push(named(ValueName::AllocatorLimit, l));
    }
    if let Some(m) = i.margin {
        values.push(named(ValueName::NeededHole, r + m));
    }
    let f_index = frag_index(i.free_total, i.largest_free);
    let mut gates = vec![
        Gate {
            name: GateName::CacheOnly,
            value: i.room as f64,
            threshold: r as f64,
            passed: true,
        },
        Gate {
            name: GateName::SpareHoles,
            value: spare as f64,
            threshold: cfg.few_spare_holes as f64,
            passed: spare <= cfg.few_spare_holes,
        },
        Gate {
            name: GateName::HoleMargin,
            value: i.margin.map_or(-1.0, |m| m as f64),
            threshold: just.round(),
            passed: just_fits,
        },
    ];
    if let Some(f) = f_index {
        gates.push(Gate {
            name: GateName::FragIndex,
            value: (f * 1000.0).round() / 1000.0,
            threshold: 0.0,
            passed: true,
        });
    }
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::FragmentationRisk,
            pid: Some(pid),
            gpu,
        },
        severity,
        message,
        summary: fit_summary(summary),
        evidence: Evidence {
            basis: Basis::Allocator,
            values,
            gates,
            ..Evidence::default()
        },
        epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = MIB_U64;

    /// The review's first mechanism: a 640 MiB request under a cap that leaves 320 MiB,
    /// fitting one hole of exactly its size.
    fn own_hole() -> FitInput {
        FitInput {
            request: 640 * M,
            times: 12,
            recurrence: Recurrence::Companion,
            room: 320 * M,
            limit: Some(1730 * M),
            reserved: 1410 * M,
            free_total: 640 * M,
            largest_free: Some(640 * M),
            holes: 1,
            need: 1,
            margin: Some(0),
            exact: true,
        }
    }

    fn check_(i: &FitInput, rt: &Runtime) -> Option<Finding> {
        check(7, 0, i, rt, &FragConfig::default(), Some(3))
    }

    #[test]
    fn a_request_fitting_only_its_own_hole_under_a_cap_is_a_warning_named() {
        let f = check_(&own_hole(), &Runtime::torch_native()).expect("risk");
        assert_eq!(f.key.kind, AlertKind::FragmentationRisk);
        assert_eq!(
            f.severity,
            Severity::Warning,
            "zero margin is not certainty"
        );
        for needle in [
            "recurring 640MiB request",
            "leaves 320MiB",
            "fits 1 cached hole, of exactly its size",
            "expandable_segments:True",
            "max_split_size_mb:576",
            "smaller batch",
        ] {
            assert!(f.message.contains(needle), "{needle}: {}", f.message);
        }
        assert!(f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX);
        assert!(f.summary.contains("fits 1 hole"), "{}", f.summary);
    }

    #[test]
    fn severity_follows_the_spare_holes_and_the_margin() {
        let rt = Runtime::torch_native();
        let roomy = FitInput {
            margin: Some(200 * M),
            ..own_hole()
        };
        assert_eq!(
            check_(&roomy, &rt).map(|f| f.severity),
            Some(Severity::Warning)
        );
        let one_spare = FitInput {
            holes: 2,
            margin: Some(200 * M),
            ..own_hole()
        };
        assert_eq!(
            check_(&one_spare, &rt).map(|f| f.severity),
            Some(Severity::Warning)
        );
        let many = FitInput {
            holes: 4,
            margin: Some(200 * M),
            ..own_hole()
        };
        assert!(
            check_(&many, &rt).is_none(),
            "three spare holes, wide margin"
        );
        let need_two = FitInput {
            holes: 2,
            need: 2,
            ..own_hole()
        };
        assert_eq!(
            check_(&need_two, &rt).map(|f| f.severity),
            Some(Severity::Warning)
        );
    }

    #[test]
    fn a_hole_that_recurs_in_most_maps_is_a_request() {
        let m = 768 * M;
        let maps: Vec<Vec<u64>> = vec![
            vec![m, 142 * M],
            vec![m, 138 * M],
            vec![140 * M], // read while the request was alive
            vec![m, 136 * M],
        ];
        assert_eq!(
            recurring_hole(maps.iter().map(|v| v.as_slice())),
            Some((m, 3))
        );
        assert_eq!(recurring_hole(maps[..2].iter().map(|v| v.as_slice())), None);
        let wandering: Vec<Vec<u64>> = (1..6).map(|i| vec![i * 100 * M]).collect();
        assert_eq!(recurring_hole(wandering.iter().map(|v| v.as_slice())), None);
    }

    #[test]
    fn room_for_new_memory_expandable_segments_or_no_recurrence_is_no_risk() {
        let rt = Runtime::torch_native();
        let room = FitInput {
            room: 640 * M,
            ..own_hole()
        };
        assert!(check_(&room, &rt).is_none(), "new memory serves it");
        let es = Runtime {
            allocator: Some("expandable_segments".into()),
            ..Runtime::torch_native()
        };
        assert!(
            check_(&own_hole(), &es).is_none(),
            "pages remap: no hole needed"
        );
        let once = FitInput {
            times: 1,
            ..own_hole()
        };
        assert!(
            check_(&once, &rt).is_none(),
            "made once: an embedding, not a step's"
        );
        let none = FitInput {
            holes: 0,
            margin: None,
            ..own_hole()
        };
        assert!(
            check_(&none, &rt).is_none(),
            "fits no hole: the reading-based rule's"
        );
    }

    #[test]
    fn holes_are_read_exactly_or_bounded_from_buckets() {
        let r = 640 * M;
        let exact = FragView {
            free_top: vec![700 * M, 640 * M, 8 * M],
            live_top: vec![768 * M, 640 * M],
            ..FragView::default()
        };
        assert_eq!(read_fit(r, &exact), Some((3, 1, Some(60 * M), true)));
        let old = FragView {
            largest_free: Some(640 * M),
            hist: Some(vec![(23, 3, 24 * M), (29, 1, 640 * M)]),
            ..FragView::default()
        };
        assert_eq!(read_fit(r, &old), Some((1, 1, Some(0), false)));
        let two = FragView {
            largest_free: Some(900 * M),
            hist: Some(vec![(29, 2, 1540 * M)]),
            ..FragView::default()
        };
        assert_eq!(read_fit(r, &two), Some((2, 1, None, false)));
        assert_eq!(split_mb(640 * M), 576);
        assert_eq!(split_mb(16 * M), 20);
    }
}
