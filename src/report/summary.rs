//! The ten-second summary: one item per alert of the run, worst first, each a sentence
//! that says who (PID, GPU), what (the alert's kind and its numbers, from the evidence the
//! alert line carries), when (epoch, time into the run) and what to do (the alert's own
//! remedy). Words only: every number comes from the replay's alert lines and the run.

use std::collections::BTreeMap;

use crate::fmt::{clock_pos, human};
use crate::model::alerts::oom_math::{Binding, OomNumbers};
use crate::model::alerts::{AlertKind, Evidence, Severity, TrendSeries, ValueName};
use crate::model::time::Ts;
use crate::report::alerts::{AlertLine, Change};
use crate::report::collect::Run;

/// A process whose last sighting is this close after its OOM died of it.
const DIED_WITHIN_MS: i64 = 60_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub severity: Severity,
    pub kind: AlertKind,
    pub pid: Option<u32>,
    pub gpu: u32,
    pub at: Ts,
    /// `PID 788 on GPU 1 died of a fragmentation OOM at epoch 6, 0:40 in: ...`
    pub headline: String,
    /// For a growth alert: whether the OOM it forecast came.
    pub outcome: Option<String>,
    pub remedy: Option<String>,
    /// The alert's own message at its worst (raised or last worsened).
    pub message: String,
}

/// One item per alert (kind, process, GPU), critical first, then in the order raised.
pub fn items(run: &Run) -> Vec<Item> {
    let mut by_key: BTreeMap<_, Vec<&AlertLine>> = BTreeMap::new();
    for a in &run.alerts {
        by_key.entry(a.key()).or_default().push(a);
    }
    let mut out: Vec<Item> = by_key
        .values()
        .filter_map(|changes| item(run, changes))
        .collect();
    out.sort_by_key(|i| (std::cmp::Reverse(i.severity), i.at));
    out
}

fn item(run: &Run, changes: &[&AlertLine]) -> Option<Item> {
    let first = changes
        .iter()
        .find(|c| c.change == Change::Raised)
        .or(changes.first())?;
    // The worst state it reached: the last raise or worsening (its severity can only rise).
    let worst = changes
        .iter()
        .rev()
        .find(|c| matches!(c.change, Change::Raised | Change::Worsened))
        .unwrap_or(first);
    let severity = changes.iter().map(|c| c.severity).max()?;
    let who = who(first);
    let when = when(run, first.at, first.epoch);
    let e = &worst.evidence;
    let v = |n: ValueName| value(e, n);
    let headline = match first.kind {
        AlertKind::FragmentationOom | AlertKind::Oom => {
            let fate = if died_of(run, first) {
                "died of"
            } else {
                "hit"
            };
            let what = if first.kind == AlertKind::Oom {
                "an OOM"
            } else {
                "a fragmentation OOM"
            };
            let mut s = format!("{who} {fate} {what} {when}");
            // The binding limit and its sums, then the cache against the request: the same
            // sentence the alert's message leads with.
            let nums = OomNumbers {
                requested: v(ValueName::Requested),
                free_total: v(ValueName::FreeInCache),
                largest_free: v(ValueName::LargestHole),
                device_free: v(ValueName::CardFree),
                limit: v(ValueName::AllocatorLimit),
                reserved: v(ValueName::Reserved),
                card_total: v(ValueName::CardTotal),
            };
            if let (Some(r), Some(words)) = (nums.requested, nums.sentence(&|b| human(b))) {
                if nums.binding() == Binding::Unknown {
                    s += &format!(": asked {}", human(r));
                    if let Some(c) = nums.device_free {
                        s += &format!(" with {} free on the card", human(c));
                    }
                    s += &format!("; {words}");
                } else {
                    s += &format!(": asked {}, {words}", human(r));
                }
            }
            s
        }
        AlertKind::Growth => {
            let rate = e
                .slope
                .map(|b| human(b.max(0.0) as u64))
                .unwrap_or_default();
            let unit = e.unit.as_ref().map_or("epoch".into(), |u| u.to_string());
            let series = e
                .series
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default();
            // A growing working set is not a leak: the growth rule says so in its message.
            let verb = if e.series == Some(TrendSeries::Peak)
                || worst.message.contains("the working set")
            {
                ": its working set grew"
            } else {
                " leaked"
            };
            let mut s = format!("{who}{verb} {rate} per {unit}{series}, found {when}");
            if let Some(f) = &e.forecast {
                s += &format!(
                    "; forecast OOM at {}",
                    match (f.at_epoch, f.ms) {
                        (Some(ep), Some(ms)) =>
                            format!("epoch {ep:.0}, {} later", crate::fmt::rough_duration(ms)),
                        (Some(ep), None) => format!("epoch {ep:.0}"),
                        (None, Some(ms)) => format!("{} later", crate::fmt::rough_duration(ms)),
                        (None, None) => format!("{:.0} steps", f.steps),
                    }
                );
            }
            s
        }
        AlertKind::CacheGrowth => {
            let rate = e
                .slope
                .map(|b| human(b.max(0.0) as u64))
                .unwrap_or_default();
            format!(
                "{who}'s allocator cache grew {rate} per epoch while allocated stayed flat (not a leak), {when}"
            )
        }
        AlertKind::FragmentationRisk => {
            let mut s = format!("{who} risked a fragmentation OOM {when}");
            if let (Some(t), Some(l), Some(r)) = (
                v(ValueName::FreeInCache),
                v(ValueName::LargestHole),
                v(ValueName::LargestRequest),
            ) {
                s += &format!(
                    ": {} free in its cache, largest hole {} < its {} requests",
                    human(t),
                    human(l),
                    human(r)
                );
            }
            s
        }
        AlertKind::GrabAll => {
            let held = v(ValueName::HeldNvml).zip(v(ValueName::CardTotal));
            match (held, v(ValueName::Allocated)) {
                (Some((h, tot)), Some(a)) => format!(
                    "{who} held {} of {} {when} while its allocator used only {}",
                    human(h),
                    human(tot),
                    human(a)
                ),
                (Some((h, tot)), None) => format!(
                    "{who} held {} of {} {when}, without a companion to tell a grab-all allocator from real use",
                    human(h),
                    human(tot)
                ),
                _ => format!("{who} may hold memory it does not use (grab-all) {when}"),
            }
        }
        AlertKind::DivergentRank => {
            // The rule's first sentence names the rank, its job and its excess.
            let said = worst.message.split(": ").next().unwrap_or_default();
            let excess = e.points.last().map(|p| human(p.bytes)).unwrap_or_default();
            let rate = e
                .slope
                .map(|b| human(b.max(0.0) as u64))
                .unwrap_or_default();
            if said.is_empty() {
                format!(
                    "{who} held {excess} more than its job's other ranks, +{rate} per epoch, {when}"
                )
            } else {
                format!("{said}, found {when}")
            }
        }
        AlertKind::Headroom => {
            let mut s = format!("{who} ran low on headroom {when}");
            if let (Some(h), Some(r)) = (v(ValueName::Headroom), v(ValueName::TypicalRequest)) {
                s += &format!(": {} left < its typical {} request", human(h), human(r));
            }
            s
        }
    };
    Some(Item {
        severity,
        kind: first.kind,
        pid: first.pid,
        gpu: first.gpu,
        at: first.at,
        headline: format!("{headline}."),
        outcome: (first.kind == AlertKind::Growth).then(|| growth_outcome(run, first)),
        remedy: remedy(&worst.message),
        message: worst.message.clone(),
    })
}

fn who(a: &AlertLine) -> String {
    match a.pid {
        Some(p) => format!("PID {p} on GPU {}", a.gpu),
        None => format!("GPU {}", a.gpu),
    }
}

/// `at epoch 6, 0:40 in (16:54:54 UTC)`.
pub fn when(run: &Run, t: Ts, epoch: Option<u64>) -> String {
    let ep = epoch.map(|e| format!("epoch {e}, ")).unwrap_or_default();
    format!("at {ep}{} in ({})", clock_pos(t - run.start, false), utc(t))
}

/// `16:54:54 UTC`.
pub fn utc(t: Ts) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
        .map(|d| d.format("%H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

fn value(e: &Evidence, n: ValueName) -> Option<u64> {
    e.values.iter().find(|v| v.name == n).map(|v| v.bytes)
}

/// The process left the run soon after this OOM, before the recording ended.
fn died_of(run: &Run, oom: &AlertLine) -> bool {
    let Some(pid) = oom.pid else { return false };
    let interval = run.header.interval_ms as i64;
    let last = run
        .procs
        .iter()
        .filter(|p| p.pid == pid)
        .filter_map(|p| p.last_seen())
        .max();
    last.is_some_and(|l| {
        l >= oom.at - interval && l - oom.at <= DIED_WITHIN_MS && l < run.end - 2 * interval
    })
}

/// Whether the OOM a growth alert forecast came, and when.
pub fn growth_outcome(run: &Run, g: &AlertLine) -> String {
    let oom = run.alerts.iter().find(|a| {
        a.is_oom() && a.change == Change::Raised && a.pid == g.pid && a.gpu == g.gpu && a.at >= g.at
    });
    match oom {
        Some(o) => format!(
            "The OOM came {}, {} after the warning.",
            when(run, o.at, o.epoch),
            crate::fmt::duration(o.at - g.at)
        ),
        None => {
            let last = run
                .procs
                .iter()
                .filter(|p| Some(p.pid) == g.pid && p.gpu == Some(g.gpu))
                .filter_map(|p| p.last_seen())
                .max();
            match last {
                Some(l) if l < run.end - 2 * run.header.interval_ms as i64 => {
                    format!("No OOM came: the process ended {}.", when(run, l, None))
                }
                _ => format!("No OOM came before the recording ended ({}).", utc(run.end)),
            }
        }
    }
}

/// The message's own remedy, when it names one.
fn remedy(message: &str) -> Option<String> {
    let i = message.find("Remedy: ")?;
    Some(message[i + "Remedy: ".len()..].trim().to_string())
}

/// One line about the whole run, for the top of the page and the Markdown.
pub fn overview(run: &Run) -> String {
    let procs: std::collections::BTreeSet<u32> = run.procs.iter().map(|p| p.pid).collect();
    let with_companion = run.procs.iter().filter(|p| p.dev.is_some()).map(|p| p.pid);
    let with_companion: std::collections::BTreeSet<u32> = with_companion.collect();
    let raised = items(run);
    let critical = raised
        .iter()
        .filter(|i| i.severity == Severity::Critical)
        .count();
    let alerts = match (raised.len(), critical) {
        (0, _) => "no alerts".to_string(),
        (n, 0) => format!("{n} alert{}", plural(n)),
        (n, c) => format!("{n} alert{} ({c} critical)", plural(n)),
    };
    format!(
        "A {} recording of {} GPU{} on {}, {} process{} ({} with a companion): {alerts}.",
        clock_pos(run.end - run.start, false),
        run.gpus.len(),
        plural(run.gpus.len()),
        if run.header.host.is_empty() {
            "an unnamed host"
        } else {
            &run.header.host
        },
        procs.len(),
        if procs.len() == 1 { "" } else { "es" },
        with_companion.len(),
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::Header;
    use crate::model::sample::{GpuInfo, GpuSample, MemInfo, ProcSample, Tick};
    use crate::report::collect::Collector;

    fn gpu() -> GpuInfo {
        GpuInfo {
            index: 1,
            name: "H200".into(),
            uuid: "GPU-1".into(),
            pci_bus_id: String::new(),
            memory_total: 1 << 34,
            mig_uuids: vec![],
        }
    }

    /// A 100 s run where PID 7 is listed on GPU 1 until `gone` (ms after the start).
    fn run(alerts: &[&str], gone: i64) -> Run {
        let mut h = Header::bare(vec![gpu()]);
        h.started = 1_000_000;
        let mut c = Collector::new("t.jsonl".into(), &h);
        let state = crate::model::state::State::default();
        for i in 0..=100 {
            let t = h.started + i * 1000;
            let procs = if i * 1000 <= gone {
                vec![ProcSample {
                    pid: 7,
                    kind: Default::default(),
                    used: Some(1 << 30),
                    ..ProcSample::default()
                }]
            } else {
                vec![]
            };
            let g = GpuSample {
                index: 1,
                mem: Some(MemInfo {
                    total: 1 << 34,
                    used: 1 << 30,
                    free: 0,
                    reserved: 0,
                }),
                util: None,
                temp_c: None,
                power_mw: None,
                procs,
                error: None,
            };
            c.observe(
                &crate::model::frame::Frame::Tick(Tick { t, gpus: vec![g] }),
                &state,
            );
        }
        let lines = alerts
            .iter()
            .map(|l| AlertLine::parse(l).expect("a valid line"))
            .collect();
        c.finish(lines)
    }

    const FRAG_OOM: &str = r#"{"time":"1970-01-01T00:17:00.000Z","change":"raised","epoch":52,"kind":"fragmentation_oom","severity":"critical","pid":7,"gpu":1,"summary":"7@1 frag OOM","message":"PID 7 ran out. Remedy: use expandable_segments:True.","evidence":{"basis":"event","values":[{"name":"requested","bytes":671088640},{"name":"T free in cache","bytes":1717986918},{"name":"L largest hole","bytes":664797184}]}}"#;
    const GROWTH: &str = r#"{"time":"1970-01-01T00:16:50.000Z","change":"raised","epoch":40,"kind":"growth","severity":"warning","pid":7,"gpu":1,"summary":"7@1 leak","message":"PID 7 leaks.","evidence":{"basis":"epochs","series":"floor","unit":"epoch","slope":33554432,"forecast":{"ceiling":4000000000,"ceiling_source":"allocator limit","current":2000000000,"rate":33554432,"steps":60,"ms":120000,"at_epoch":100}}}"#;

    #[test]
    fn a_fragmentation_oom_the_process_died_of_reads_in_one_sentence() {
        // Raised 20 s in; the process is gone 4 s later, long before the end.
        let r = run(&[FRAG_OOM], 24_000);
        let items = items(&r);
        assert_eq!(items.len(), 1);
        let i = &items[0];
        assert_eq!(
            i.headline,
            "PID 7 on GPU 1 died of a fragmentation OOM at epoch 52, 0:20 in (00:17:00 UTC): \
             asked 640 MiB; its cache held 1.60 GiB free, largest hole 634 MiB < 640 MiB."
        );
        assert_eq!(i.remedy.as_deref(), Some("use expandable_segments:True."));
        assert_eq!(i.severity, Severity::Critical);
    }

    /// The review's recording D: 248 MiB asked under a 2.80 GiB cap with 134 GiB free on
    /// the card; the headline names the cap and its sums before the cache.
    #[test]
    fn an_oom_headline_names_the_cap_that_bound_it() {
        let line = FRAG_OOM
            .replace("fragmentation_oom", "oom")
            .replace(
                r#"{"name":"requested","bytes":671088640},{"name":"T free in cache","bytes":1717986918},{"name":"L largest hole","bytes":664797184}"#,
                r#"{"name":"requested","bytes":260046848},{"name":"T free in cache","bytes":554696704},{"name":"L largest hole","bytes":105906176},{"name":"card free","bytes":143881404416},{"name":"reserved","bytes":2190475264},{"name":"allocator limit","bytes":3006477107}"#,
            );
        let r = run(&[&line], 24_000);
        let h = &items(&r)[0].headline;
        assert!(
            h.contains(
                "asked 248 MiB, bound by its allocator limit of 2.80 GiB: the card had 134 GiB free, \
                 so it was reserved + 248 MiB asked that passed 2.80 GiB, with reserved above 2.56 GiB"
            ),
            "{h}"
        );
        assert!(h.ends_with("largest hole 101 MiB < 248 MiB."), "{h}");
    }

    #[test]
    fn an_oom_the_process_survived_is_hit_not_died_of() {
        let r = run(&[FRAG_OOM], 100_000);
        assert!(items(&r)[0].headline.contains(" hit a fragmentation OOM "));
    }

    #[test]
    fn a_growth_alert_says_whether_its_forecast_oom_came() {
        let r = run(&[GROWTH, FRAG_OOM], 24_000);
        let items = items(&r);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].kind, AlertKind::FragmentationOom, "critical first");
        let g = &items[1];
        assert!(
            g.headline.starts_with(
                "PID 7 on GPU 1 leaked 32.0 MiB per epoch (floor), found at epoch 40, 0:10 in"
            ),
            "{}",
            g.headline
        );
        assert!(
            g.headline
                .contains("forecast OOM at epoch 100, ~2 min later"),
            "{}",
            g.headline
        );
        assert_eq!(
            g.outcome.as_deref(),
            Some("The OOM came at epoch 52, 0:20 in (00:17:00 UTC), 10s after the warning.")
        );
        let alone = run(&[GROWTH], 50_000);
        assert_eq!(
            items_outcome(&alone),
            "No OOM came: the process ended at 0:50 in (00:17:30 UTC)."
        );
        let kept = run(&[GROWTH], 100_000);
        assert!(items_outcome(&kept).starts_with("No OOM came before the recording ended"));
    }

    fn items_outcome(r: &Run) -> String {
        items(r)[0].outcome.clone().expect("growth has an outcome")
    }

    #[test]
    fn the_overview_counts_processes_and_alerts() {
        let r = run(&[GROWTH, FRAG_OOM], 24_000);
        assert_eq!(
            overview(&r),
            "A 1:40 recording of 1 GPU on h, 1 process (0 with a companion): 2 alerts (1 critical)."
        );
        assert!(overview(&run(&[], 0)).ends_with("no alerts."));
    }
}
