//! A leak in steps meeting its ceiling (corpus3's `expandable_pinned` run):
//! a tensor kept every few epochs raises the allocated floor by the same amount each time
//! and leaves it flat in between. The growth rule's statistics see a staircase as flat
//! most of the time (the median step is zero, by design: batch-size steps look the same),
//! so this rule looks at the mechanism instead. With expandable segments there is no hole
//! to fragment (reserved stays flat; the fragmentation rules rightly stay silent), yet the
//! run dies all the same: each kept step raises the step's peak (the floor plus the
//! program's recurring request) towards the allocator's limit, and the OOM comes on the
//! step that no longer fits. What tells it from a batch-size schedule is not its shape but
//! where it is going: equal steps, none given back, and a ceiling one or two steps away.
//! A schedule with room to spare, or without a limit, stays silent.

use super::format::{fit_summary, who};
use super::growth::Ceiling;
use super::inputs::EpochPoint;
use super::{
    AlertKey, AlertKind, Basis, Evidence, Finding, Forecast, Named, Point, Severity, StepUnit,
    TrendSeries, ValueName,
};
use crate::fmt::compact;

/// A rise of the floor smaller than this is noise (floors counted after gc are exact to
/// the allocator's 2 MiB rounding at worst).
const MIN_STEP: u64 = 2 << 20;
/// At least this many rises: two could be a batch size doubled twice.
const MIN_STEPS: usize = 3;
/// Kept tensors of one kind: every rise within this factor of their median.
const SIZE_SPREAD: f64 = 1.5;
/// Warn while the room left under the ceiling holds fewer than this many more steps.
const WARN_STEPS: u64 = 2;

#[derive(Debug, Clone, PartialEq)]
pub struct StairInput<'a> {
    pub pid: u32,
    pub gpu: u32,
    /// Epoch-end floors, oldest first (the companion's exact ones).
    pub epochs: &'a [EpochPoint],
    /// The program's largest recurring request (what each step allocates on top of the
    /// floor), when the companion reports it.
    pub request: Option<u64>,
    pub ceiling: Option<Ceiling>,
}

/// The rises of the floor, as (index into `epochs`, bytes); `None` when the floor ever
/// falls by a step's worth (what is kept is given back: not a leak).
fn rises(epochs: &[EpochPoint]) -> Option<Vec<(usize, u64)>> {
    let mut out = Vec::new();
    for (i, w) in epochs.windows(2).enumerate() {
        let (a, b) = (w[0].floor, w[1].floor);
        if b > a + MIN_STEP {
            out.push((i + 1, b - a));
        } else if a > b + MIN_STEP {
            return None;
        }
    }
    Some(out)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

pub fn check(i: &StairInput<'_>) -> Option<Finding> {
    let ceiling = i.ceiling.as_ref()?;
    let last = i.epochs.last()?;
    let steps = rises(i.epochs)?;
    if steps.len() < MIN_STEPS {
        return None;
    }
    let sizes: Vec<u64> = steps.iter().map(|s| s.1).collect();
    let step = median(sizes.clone());
    let (lo, hi) = (*sizes.iter().min()? as f64, *sizes.iter().max()? as f64);
    if hi > step as f64 * SIZE_SPREAD || lo * SIZE_SPREAD < step as f64 {
        return None;
    }
    // The step's peak: the floor plus the recurring request, or the highest peak seen
    // since the last rise where the companion caught one.
    let since = steps.last().map_or(0, |s| s.0);
    let seen_peak = i.epochs[since..].iter().filter_map(|e| e.peak).max();
    let peak = i
        .request
        .map(|r| last.floor.saturating_add(r))
        .into_iter()
        .chain(seen_peak)
        .max()?;
    let room = ceiling.bytes.saturating_sub(peak);
    let fit = room / step.max(1);
    if fit >= WARN_STEPS {
        return None;
    }
    let gaps: Vec<u64> = steps
        .windows(2)
        .map(|w| i.epochs[w[1].0].epoch - i.epochs[w[0].0].epoch)
        .collect();
    let period = median(gaps).max(1);
    let last_rise = i.epochs[since].epoch;
    // The OOM comes with the first step that does not fit.
    let at = last_rise + period * (fit + 1);
    let left = at.saturating_sub(last.epoch);
    let severity = if fit == 0 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let next = if fit == 0 {
        "the next step does not fit".to_string()
    } else {
        format!("{fit} more step fits")
    };
    let request = i
        .request
        .map_or_else(String::new, |r| format!(" + its {} request", compact(r)));
    let message = format!(
        "PID {} on GPU {}: its allocated floor has risen in {} equal steps of about {} (about every {period} epochs, the last at epoch {last_rise}) and never fell: something is kept every few epochs, a leak in steps. A step's peak ({} floor{request}) leaves {} under the {} ({}): {next}, so an OOM is expected around epoch {at}. Find what is kept (a tensor stored without .detach()/.item(), an output list that grows); expandable segments or a larger cap only move the OOM.",
        i.pid,
        i.gpu,
        steps.len(),
        compact(step),
        compact(last.floor),
        compact(room),
        ceiling.source,
        compact(ceiling.bytes),
    );
    let summary = format!(
        "{} steps +{}, {} left",
        who(Some(i.pid), i.gpu),
        compact(step).replace("MiB", "M").replace("GiB", "G"),
        compact(room).replace("MiB", "M").replace("GiB", "G")
    );
    let points = i
        .epochs
        .iter()
        .map(|e| Point {
            x: e.epoch as i64,
            t: e.t,
            bytes: e.floor,
        })
        .collect();
    let mut values = vec![
        Named {
            name: ValueName::Allocated,
            bytes: last.floor,
        },
        Named {
            name: ValueName::Headroom,
            bytes: room,
        },
    ];
    if let Some(r) = i.request {
        values.push(Named {
            name: ValueName::RecurringRequest,
            bytes: r,
        });
    }
    Some(Finding {
        key: AlertKey {
            kind: AlertKind::Growth,
            pid: Some(i.pid),
            gpu: i.gpu,
        },
        severity,
        message,
        summary: fit_summary(summary),
        evidence: Evidence {
            basis: Basis::Epochs,
            series: Some(TrendSeries::Floor),
            unit: Some(StepUnit::Epoch),
            points,
            slope: Some(step as f64 / period as f64),
            forecast: Some(Forecast {
                ceiling: ceiling.bytes,
                ceiling_source: ceiling.source.clone(),
                current: peak,
                rate: step as f64 / period as f64,
                steps: left as f64,
                ms: None,
                at_epoch: Some(at as f64),
            }),
            values,
            ..Evidence::default()
        },
        epoch: Some(last.epoch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alerts::CeilingSource;

    const MIB: u64 = 1 << 20;

    /// `expandable_pinned`'s shape: 512 MiB, +140 MiB every 6 epochs, 256 MiB per step,
    /// a 1858 MiB cap.
    fn stairs(epochs: u64, step: impl Fn(u64) -> u64) -> Vec<EpochPoint> {
        (0..epochs)
            .map(|e| EpochPoint {
                epoch: e,
                t: e as i64 * 1000,
                floor: 512 * MIB + (e / 6) * step(e / 6),
                peak: None,
                reserved: Some(1800 * MIB),
            })
            .collect()
    }

    fn input(epochs: &[EpochPoint], cap: u64) -> StairInput<'_> {
        StairInput {
            pid: 778,
            gpu: 0,
            epochs,
            request: Some(256 * MIB),
            ceiling: Some(Ceiling {
                bytes: cap,
                source: CeilingSource::AllocatorLimit,
            }),
        }
    }

    #[test]
    fn a_staircase_is_flagged_as_its_ceiling_comes_within_two_steps() {
        let cap = 1858 * MIB;
        let at = |n: u64| check(&input(&stairs(n, |_| 140 * MIB), cap));
        // Epoch 30: floor 1212 MiB + 256 = 1468, 390 MiB left: two steps fit.
        assert_eq!(at(31), None);
        // Epoch 36: 1608 at the peak, 250 left: one step.
        let w = at(37).expect("warning");
        assert_eq!(w.severity, Severity::Warning);
        // Epoch 42: 110 MiB left, a step is 140: the next does not fit (OOM was at 48).
        let c = at(43).expect("critical");
        assert_eq!(c.severity, Severity::Critical);
        assert_eq!(
            c.evidence.forecast.as_ref().and_then(|f| f.at_epoch),
            Some(48.0)
        );
        assert!(
            c.message.contains("the next step does not fit"),
            "{}",
            c.message
        );
        assert!(c.summary.chars().count() <= crate::model::alerts::SUMMARY_MAX);
    }

    #[test]
    fn no_ceiling_in_reach_unequal_steps_or_a_floor_that_falls_is_silent() {
        // A batch-size schedule: steps that double, and no limit near.
        let sched = stairs(43, |k| (1u64 << k.min(6)) * 8 * MIB);
        assert_eq!(check(&input(&sched, 1858 * MIB)), None, "unequal steps");
        let eq = stairs(43, |_| 140 * MIB);
        assert_eq!(check(&input(&eq, 140 << 30)), None, "room for many steps");
        let mut falls = eq.clone();
        falls[40].floor = 512 * MIB;
        assert_eq!(check(&input(&falls, 1858 * MIB)), None, "given back");
        let two = stairs(13, |_| 140 * MIB);
        assert_eq!(check(&input(&two, 1000 * MIB)), None, "two rises");
        let none = StairInput {
            ceiling: None,
            ..input(&eq, 0)
        };
        assert_eq!(check(&none), None);
    }
}
