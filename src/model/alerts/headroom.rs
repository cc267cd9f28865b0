//! Headroom: the largest allocation that would succeed now, max(largest free block in
//! the cache, what the card can still give), against the run's typical large request.

use super::format::{fit_summary, who};
use super::{
    AlertKey, AlertKind, Basis, Evidence, Finding, Gate, GateName, Named, Severity, ValueName,
};
use crate::fmt::compact;

/// Largest allocation that would succeed now.
pub fn largest_possible(largest_free: Option<u64>, device_avail: u64) -> u64 {
    largest_free.unwrap_or(0).max(device_avail)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadroomInput {
    /// T: free bytes in the cache.
    pub free_total: u64,
    pub largest_free: Option<u64>,
    /// D: what the card can still give this process.
    pub device_avail: u64,
    /// The run's typical per-step peak request.
    pub request: u64,
}

/// Raised when neither the cache nor the card can serve the typical request. When the
/// free total alone would fit it, the shortage is fragmentation and that rule speaks instead.
pub fn check(pid: u32, gpu: u32, i: &HeadroomInput, epoch: Option<u64>) -> Option<Finding> {
    let h = largest_possible(i.largest_free, i.device_avail);
    if i.request == 0 || h >= i.request || i.free_total >= i.request {
        return None;
    }
    let hole = i
        .largest_free
        .map_or_else(|| "unknown".to_string(), compact);
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::Headroom,
            pid: Some(pid),
            gpu,
        },
        severity: Severity::Warning,
        message: format!(
            "PID {pid} on GPU {gpu}: the largest allocation that would succeed now is {} (largest free block in the cache {hole}, from the card {}), below the {} this run typically requests at its per-step peak: the next step may run out of memory.",
            compact(h),
            compact(i.device_avail),
            compact(i.request)
        ),
        summary: fit_summary(format!(
            "{} headroom {} < {}",
            who(Some(pid), gpu),
            compact(h),
            compact(i.request)
        )),
        evidence: Evidence {
            basis: Basis::Allocator,
            values: vec![
                Named {
                    name: ValueName::Headroom,
                    bytes: h,
                },
                Named {
                    name: ValueName::TypicalRequest,
                    bytes: i.request,
                },
                Named {
                    name: ValueName::FreeInCache,
                    bytes: i.free_total,
                },
            ],
            gates: vec![Gate {
                name: GateName::Headroom,
                value: h as f64,
                threshold: i.request as f64,
                passed: true,
            }],
            ..Evidence::default()
        },
        epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::{GIB_U64, MIB_U64};

    #[test]
    fn warns_only_when_neither_cache_nor_card_fits() {
        let short = HeadroomInput {
            free_total: 500 * MIB_U64,
            largest_free: Some(400 * MIB_U64),
            device_avail: 300 * MIB_U64,
            request: 2 * GIB_U64,
        };
        let f = check(3, 1, &short, None).expect("short");
        assert!(f.message.contains("400MiB"));
        assert!(f.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX);
        assert!(
            check(
                3,
                1,
                &HeadroomInput {
                    device_avail: 3 * GIB_U64,
                    ..short
                },
                None
            )
            .is_none()
        );
        assert!(
            check(
                3,
                1,
                &HeadroomInput {
                    free_total: 3 * GIB_U64,
                    ..short
                },
                None
            )
            .is_none(),
            "fragmentation's case"
        );
        assert_eq!(largest_possible(None, 5), 5);
        assert_eq!(largest_possible(Some(9), 5), 9);
    }
}
