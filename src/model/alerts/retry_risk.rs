//! Fragmentation risk from the allocator's own distress: it had to
//! flush its cache and retry during the last epochs (`num_alloc_retries` rose), the
//! largest request fits in no hole at the step's peak (the lowest L read since the
//! previous epoch end), and the free pieces are a real share of the cache, not the
//! slack a caching allocator keeps mid-step: at least `oom_free_multiple` × the request
//! and `min_free_share` of reserved. A leak running into its cap also causes retries,
//! but leaves little free; a full card too (T 1.0–1.5 × the request on the first
//! corpus). Raised as `FragmentationRisk`, like the reading-based rule it stands in for
//! when L now looks fine.

use super::config::FragConfig;
use super::fragmentation::{self, FragInput};
use super::inputs::Runtime;
use super::{Finding, Gate, GateName, Named, ValueName};
use crate::fmt::compact;

/// What the rule reads besides the fragmentation reading; the engine's `Memory` follows
/// the retries and holes across evaluations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryInput {
    /// T, L now, D and R, as the reading-based rule gets them.
    pub frag: FragInput,
    /// Retries added during the last one or two completed epochs.
    pub retries: u64,
    /// The smallest L since the previous epoch end, when one was read.
    pub hole_at_peak: Option<u64>,
    pub reserved: u64,
    /// A `FragmentationRisk` alert is active on the process.
    pub active: bool,
}

pub fn check(
    pid: u32,
    gpu: u32,
    i: &RetryInput,
    rt: &Runtime,
    cfg: &FragConfig,
    epoch: Option<u64>,
) -> Option<Finding> {
    let fi = &i.frag;
    let (retries, reserved) = (i.retries, i.reserved);
    let hole = match (i.hole_at_peak, fi.largest_free) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let (t, r) = (fi.free_total, fi.request);
    let pieces = t as f64 >= cfg.oom_free_multiple * r as f64
        && t as f64 >= cfg.min_free_share * reserved as f64;
    // Once raised it stays while the pieces still cannot serve R: the retries that
    // showed the distress come every few epochs, the stranded cache stays (without
    // this the demo's alert cleared and came back every 5 s).
    if (retries == 0 && !i.active) || r <= hole || !pieces {
        return None;
    }
    // The reading-based rule's finding on the hole at the peak, with no card to fall
    // back on (a flush is the only way to room), then reworded.
    let mut f = fragmentation::risk(
        pid,
        gpu,
        &FragInput {
            largest_free: Some(hole),
            device_avail: 0,
            ..*fi
        },
        rt,
        epoch,
    )?;
    let distress = match retries {
        0 => "had to flush its cache and retry in earlier epochs (num_alloc_retries)".to_string(),
        1 => "had to flush its cache and retry once in the last epochs (num_alloc_retries)"
            .to_string(),
        n => format!(
            "had to flush its cache and retry {n} times in the last epochs (num_alloc_retries)"
        ),
    };
    f.message = format!(
        "PID {pid} on GPU {gpu}: the allocator {distress}, it holds {} free but its largest hole at the step's peak is {}, so the next {} request ({}) fits in no hole and only a flush can make room: an OOM from fragmentation is likely. {}",
        compact(t),
        compact(hole),
        compact(r),
        fi.request_source.words(),
        fragmentation::advice(rt)
    );
    for g in &mut f.evidence.gates {
        if g.name == GateName::FitsNoHole {
            g.name = GateName::FitsNoHoleAtPeak;
        }
    }
    f.evidence.gates.push(Gate {
        name: GateName::Retries,
        value: retries as f64,
        threshold: 1.0,
        passed: true,
    });
    f.evidence.gates.push(Gate {
        name: GateName::FreeShare,
        value: (t as f64 / reserved.max(1) as f64 * 1000.0).round() / 1000.0,
        threshold: cfg.min_free_share,
        passed: true,
    });
    // D as it really is, not the 0 the finding was judged with.
    f.evidence.values.retain(|v| v.name != ValueName::FromCard);
    f.evidence.values.push(Named {
        name: ValueName::FromCard,
        bytes: fi.device_avail,
    });
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::MIB_U64;
    use crate::model::alerts::AlertKind;
    use crate::model::alerts::fragmentation::RequestSource;

    const M: u64 = MIB_U64;

    /// 8.79 GiB free whose hole at the step's peak is 18 MiB, L 128 MiB at the epoch end,
    /// a 64 MiB request, plenty of card left.
    fn input(retries: u64) -> RetryInput {
        RetryInput {
            frag: FragInput {
                free_total: 9000 * M,
                largest_free: Some(128 * M),
                device_avail: 50_000 * M,
                request: 64 * M,
                request_source: RequestSource::BlockMap,
            },
            retries,
            hole_at_peak: Some(18 * M),
            reserved: 12_000 * M,
            active: false,
        }
    }

    #[test]
    fn retries_and_no_hole_at_the_peak_is_a_risk_that_reports_the_real_d() {
        let f = check(
            3,
            0,
            &input(1),
            &Runtime::default(),
            &FragConfig::default(),
            None,
        )
        .expect("risk");
        assert_eq!(f.key.kind, AlertKind::FragmentationRisk);
        assert!(f.message.contains("retry once"), "{}", f.message);
        assert!(f.message.contains("is 18.0MiB"), "{}", f.message);
        let names: Vec<&GateName> = f.evidence.gates.iter().map(|g| &g.name).collect();
        assert!(names.contains(&&GateName::FitsNoHoleAtPeak), "{names:?}");
        assert!(!names.contains(&&GateName::FitsNoHole), "{names:?}");
        let d: Vec<u64> = f
            .evidence
            .values
            .iter()
            .filter(|v| v.name == ValueName::FromCard)
            .map(|v| v.bytes)
            .collect();
        assert_eq!(d, [50_000 * M]);
    }

    #[test]
    fn no_retries_a_fitting_hole_or_mere_slack_is_no_risk() {
        let cfg = FragConfig::default();
        let rt = Runtime::default();
        assert!(check(3, 0, &input(0), &rt, &cfg, None).is_none());
        let active = RetryInput {
            active: true,
            ..input(0)
        };
        assert!(check(3, 0, &active, &rt, &cfg, None).is_some(), "stays");
        let fits = RetryInput {
            hole_at_peak: Some(64 * M),
            ..input(2)
        };
        assert!(check(3, 0, &fits, &rt, &cfg, None).is_none());
        let slack = RetryInput {
            reserved: 40_000 * M,
            ..input(2)
        };
        assert!(check(3, 0, &slack, &rt, &cfg, None).is_none());
    }
}
