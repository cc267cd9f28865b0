//! One node's series turned back into the frames a local gpumon would have read: a header,
//! ticks, /proc facts, and companion messages for the allocator series. Fed to a model of
//! its own, they give the same GPU cards, process rows and allocator lines as on the node.
//!
//! What the metrics do not carry (the companion's epoch history before the node was
//! opened, markers, block maps of the past, a process's command line) is not invented: the
//! screens show what there is, and the node's own gpumon has the rest.

use std::collections::{BTreeMap, BTreeSet};

use super::answer::Series;
use crate::model::frame::{CompanionFrame, FORMAT_VERSION, Frame, Header};
use crate::model::sample::{GpuInfo, GpuSample, MemInfo, ProcInfo, ProcSample, Tick};
use crate::model::time::Ts;
use crate::wire::{DeviceInfo, EpochRecord, Frag, Hello, Message, Role, Sample};

/// Everything about one node, current: its series by name.
pub fn node_query(node: &str) -> String {
    format!("{{hostname=\"{}\",__name__=~\"gpumon_.+\"}}", escape(node))
}

/// The charted series of one node, for its history when it is opened, with what names its
/// GPUs (without it the history's header would have no GPUs, and the first live header,
/// which has them, would start the model again).
pub fn history_query(node: &str) -> String {
    format!(
        "{{hostname=\"{}\",__name__=~\"gpumon_(info|gpu_info|gpu_memory_(total|used|free|reserved)_bytes|gpu_utilization_ratio|process_gpu_memory_used_bytes|allocator_(allocated|reserved)_bytes)\"}}",
        escape(node)
    )
}

/// A PromQL string literal's body.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// What was already sent for the open node, so each refresh adds only what is new.
#[derive(Debug, Default)]
pub struct NodeFeed {
    pub node: String,
    header: Option<Header>,
    /// Processes whose facts (and companion hello) were sent.
    procs: BTreeSet<u32>,
    hellos: BTreeSet<u32>,
    /// Last completed epoch sent per (pid, GPU).
    epochs: BTreeMap<(u32, u32), u64>,
    last_tick: Option<Ts>,
}

/// A process on a GPU as the node's series describe it.
#[derive(Default)]
struct ProcRow<'a> {
    labels: Option<&'a Series>,
    used: Option<f64>,
    alloc: BTreeMap<&'a str, f64>,
    classes: Vec<(u32, f64, f64)>,
}

impl NodeFeed {
    pub fn new(node: &str) -> NodeFeed {
        NodeFeed {
            node: node.to_string(),
            ..NodeFeed::default()
        }
    }

    /// Frames for one answer to [`node_query`] evaluated at `t`; `interval_ms` is how often
    /// gpumon asks (the header's sampling interval).
    pub fn frames(&mut self, series: &[Series], t: Ts, interval_ms: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let gpus = gpu_infos(series);
        let info = series.iter().find(|s| s.name() == "gpumon_info");
        let header = Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: self.node.clone(),
            driver_version: info
                .and_then(|s| s.label("driver_version"))
                .map(str::to_string),
            nvml_version: None,
            cuda_version: info
                .and_then(|s| s.label("cuda_version"))
                .map(str::to_string),
            started: self.header.as_ref().map_or(t, |h| h.started),
            interval_ms,
            gpus: gpus.clone(),
            gpumon_version: info
                .and_then(|s| s.label("version"))
                .unwrap_or_default()
                .to_string(),
        };
        if self.header.as_ref().is_none_or(|h| h.gpus != header.gpus) {
            out.push(Frame::Header(header.clone()));
            self.header = Some(header);
        }
        if self.last_tick.is_some_and(|last| t <= last) {
            return out;
        }
        self.last_tick = Some(t);
        let rows = proc_rows(series);
        let new_procs: Vec<ProcInfo> = rows
            .iter()
            .filter(|((pid, _), _)| !self.procs.contains(pid))
            .filter_map(|(&(pid, _), r)| Some(proc_info(pid, r.labels?)))
            .collect();
        if !new_procs.is_empty() {
            self.procs.extend(new_procs.iter().map(|p| p.pid));
            out.push(Frame::Procs {
                t,
                procs: new_procs,
            });
        }
        out.push(Frame::Tick(tick(series, &gpus, &rows, t)));
        out.extend(self.companion(&gpus, &rows, t));
        out
    }

    /// Allocator series as companion messages: a hello on first sight, then a sample and a
    /// block-map summary each refresh, and an epoch record when one completes.
    fn companion(
        &mut self,
        gpus: &[GpuInfo],
        rows: &BTreeMap<(u32, u32), ProcRow<'_>>,
        t: Ts,
    ) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut by_pid: BTreeMap<u32, Vec<(u32, &ProcRow<'_>)>> = BTreeMap::new();
        for ((pid, gpu), r) in rows.iter().filter(|(_, r)| !r.alloc.is_empty()) {
            by_pid.entry(*pid).or_default().push((*gpu, r));
        }
        let msg = |pid: u32, msg: Message| Frame::Companion(CompanionFrame { t, pid, msg });
        for (pid, devs) in &by_pid {
            if self.hellos.insert(*pid) {
                let devices = devs
                    .iter()
                    .filter_map(|(gpu, _)| {
                        let g = gpus.iter().find(|g| g.index == *gpu)?;
                        Some(DeviceInfo {
                            dev: *gpu,
                            uuid: Some(g.uuid.clone()),
                            pci_bus_id: Some(g.pci_bus_id.clone()),
                            name: Some(g.name.clone()),
                            total: Some(g.memory_total),
                        })
                    })
                    .collect();
                let labels = devs.first().and_then(|(_, r)| r.labels);
                out.push(msg(
                    *pid,
                    Message::Hello(Hello {
                        role: Role::Companion,
                        pid: Some(*pid),
                        devices,
                        rank: labels.and_then(|s| s.num("rank")),
                        local_rank: labels.and_then(|s| s.num("local_rank")),
                        ..Hello::default()
                    }),
                ));
            }
            for (gpu, r) in devs {
                let a = |k: &str| r.alloc.get(k).map(|v| *v as u64);
                out.push(msg(
                    *pid,
                    Message::Sample(Sample {
                        t: Some(t),
                        dev: *gpu,
                        allocated: a("allocated_bytes"),
                        reserved: a("reserved_bytes"),
                        peak_allocated: a("peak_allocated_bytes"),
                        peak_reserved: a("peak_reserved_bytes"),
                        limit: a("limit_bytes"),
                        largest_free: a("largest_free_block_bytes"),
                        num_alloc_retries: a("alloc_retries_total"),
                        num_ooms: a("ooms_total"),
                        epoch: a("epoch"),
                        ..Sample::default()
                    }),
                ));
                if a("free_bytes").is_some() || !r.classes.is_empty() {
                    let hist = (!r.classes.is_empty()).then(|| {
                        r.classes
                            .iter()
                            .map(|(k, n, b)| (*k, *n as u64, *b as u64))
                            .collect()
                    });
                    out.push(msg(
                        *pid,
                        Message::Frag(Frag {
                            t: Some(t),
                            dev: *gpu,
                            free_total: a("free_bytes"),
                            largest_free: a("largest_free_block_bytes"),
                            n_free_blocks: a("free_blocks"),
                            hist,
                            source: Some("metrics".into()),
                            ..Frag::default()
                        }),
                    ));
                }
                if let Some(done) = a("last_completed_epoch")
                    && self.epochs.insert((*pid, *gpu), done) != Some(done)
                {
                    out.push(msg(
                        *pid,
                        Message::Epoch(EpochRecord {
                            t: Some(t),
                            epoch: done,
                            dev: *gpu,
                            floor: a("epoch_floor_bytes"),
                            peak: a("epoch_peak_bytes"),
                            ..EpochRecord::default()
                        }),
                    ));
                }
            }
        }
        out
    }
}

fn gpu_infos(series: &[Series]) -> Vec<GpuInfo> {
    let mut v: Vec<GpuInfo> = series
        .iter()
        .filter(|s| s.name() == "gpumon_gpu_info")
        .filter_map(|s| {
            let index = s.num("gpu")?;
            let total = series
                .iter()
                .find(|m| {
                    m.name() == "gpumon_gpu_memory_total_bytes"
                        && m.num::<u32>("gpu") == Some(index)
                })
                .and_then(Series::value)
                .unwrap_or(0.0);
            Some(GpuInfo {
                index,
                name: s.label("name").unwrap_or("GPU").to_string(),
                uuid: s.label("uuid").unwrap_or_default().to_string(),
                pci_bus_id: s.label("pci_bus_id").unwrap_or_default().to_string(),
                memory_total: total as u64,
                mig_uuids: Vec::new(),
            })
        })
        .collect();
    v.sort_by_key(|g| g.index);
    v.dedup_by_key(|g| g.index);
    v
}

fn proc_rows(series: &[Series]) -> BTreeMap<(u32, u32), ProcRow<'_>> {
    let mut rows: BTreeMap<(u32, u32), ProcRow<'_>> = BTreeMap::new();
    for s in series {
        let (Some(pid), Some(gpu)) = (s.num::<u32>("pid"), s.num::<u32>("gpu")) else {
            continue;
        };
        let name = s.name();
        if name == "gpumon_process_gpu_memory_used_bytes" {
            let r = rows.entry((pid, gpu)).or_default();
            r.labels = Some(s);
            r.used = s.value();
        } else if let Some(k) = name.strip_prefix("gpumon_allocator_") {
            let r = rows.entry((pid, gpu)).or_default();
            if r.labels.is_none() {
                r.labels = Some(s);
            }
            let Some(v) = s.value() else { continue };
            if let Some(kind) = k.strip_prefix("free_block_class_") {
                let Some(size) = s
                    .num::<u64>("size_min_bytes")
                    .filter(|b| b.is_power_of_two())
                else {
                    continue;
                };
                let k = size.trailing_zeros();
                let i = match r.classes.iter().position(|c| c.0 == k) {
                    Some(i) => i,
                    None => {
                        r.classes.push((k, 0.0, 0.0));
                        r.classes.len() - 1
                    }
                };
                if kind == "blocks" {
                    r.classes[i].1 = v;
                } else {
                    r.classes[i].2 = v;
                }
            } else {
                r.alloc.insert(k, v);
            }
        }
    }
    for r in rows.values_mut() {
        r.classes.sort_by_key(|c| c.0);
    }
    rows
}

fn proc_info(pid: u32, s: &Series) -> ProcInfo {
    let kube = match (s.label("pod"), s.label("namespace"), s.label("container")) {
        (None, None, None) => None,
        (pod, namespace, container) => Some(crate::model::placement::Kube {
            pod: pod.map(str::to_string),
            namespace: namespace.map(str::to_string),
            container: container.map(str::to_string),
            container_id: s.label("container_id").map(str::to_string),
        }),
    };
    ProcInfo {
        pid,
        user: s.label("user").map(str::to_string),
        name: s.label("process").map(str::to_string),
        rank: s.num("rank"),
        local_rank: s.num("local_rank"),
        // The exported job name (`train.py@10.0.0.1:29500`) stands for what its ranks
        // share, so ranks of one job on this node fold together as on the node itself;
        // its program part is the process label again, which the job's name adds back.
        run_id: s.job().map(|j| {
            match (s.label("process"), j.split_once('@')) {
                (Some(p), Some((pre, rest))) if pre == p => rest,
                _ => j,
            }
            .to_string()
        }),
        kube,
        ..ProcInfo::default()
    }
}

fn tick(
    series: &[Series],
    gpus: &[GpuInfo],
    rows: &BTreeMap<(u32, u32), ProcRow<'_>>,
    t: Ts,
) -> Tick {
    let value = |name: &str, gpu: u32| {
        series
            .iter()
            .find(|s| {
                s.name() == name && s.num::<u32>("gpu") == Some(gpu) && s.label("pid").is_none()
            })
            .and_then(Series::value)
    };
    let gpus = gpus
        .iter()
        .map(|g| {
            let i = g.index;
            let up = value("gpumon_gpu_up", i) != Some(0.0);
            let mem = match (
                value("gpumon_gpu_memory_used_bytes", i),
                value("gpumon_gpu_memory_free_bytes", i),
            ) {
                (Some(used), free) => Some(MemInfo {
                    total: g.memory_total,
                    used: used as u64,
                    free: free.map_or(g.memory_total.saturating_sub(used as u64), |f| f as u64),
                    reserved: value("gpumon_gpu_memory_reserved_bytes", i).unwrap_or(0.0) as u64,
                }),
                (None, _) => None,
            };
            GpuSample {
                index: i,
                mem: mem.filter(|_| up),
                util: value("gpumon_gpu_utilization_ratio", i).map(|r| (r * 100.0).round() as u32),
                temp_c: value("gpumon_gpu_temperature_celsius", i).map(|c| c as u32),
                power_mw: value("gpumon_gpu_power_watts", i).map(|w| (w * 1000.0) as u32),
                procs: rows
                    .iter()
                    .filter(|((_, gpu), r)| *gpu == i && r.used.is_some())
                    .map(|((pid, _), r)| ProcSample {
                        pid: *pid,
                        kind: Default::default(),
                        used: r.used.map(|u| u as u64),
                    })
                    .collect(),
                error: (!up).then(|| "the node's gpumon could not read this GPU".into()),
            }
        })
        .collect();
    Tick { t, gpus }
}

/// A node's history (the answer to [`history_query`] over a range) as ticks, oldest first,
/// with a header and process facts ahead of them: what the charts show when it opens.
pub fn history(feed: &mut NodeFeed, series: &[Series], interval_ms: u64) -> Vec<Frame> {
    let mut times: BTreeSet<Ts> = BTreeSet::new();
    for s in series {
        times.extend(s.points.iter().map(|p| p.0));
    }
    let mut out = Vec::new();
    // Each point in time, seen as an instant answer: the same translation as live.
    for t in times {
        let at: Vec<Series> = series
            .iter()
            .filter_map(|s| {
                let p = s.points.iter().find(|p| p.0 == t)?;
                Some(Series {
                    labels: s.labels.clone(),
                    points: vec![*p],
                })
            })
            .collect();
        out.extend(feed.frames(&at, t, interval_ms));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::state::State;

    fn s(name: &str, labels: &[(&str, &str)], v: f64) -> Series {
        let mut l: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert("__name__".into(), name.into());
        l.insert("hostname".into(), "n1".into());
        Series {
            labels: l,
            points: vec![(0, v)],
        }
    }

    fn answer(allocated: f64, done_epoch: f64) -> Vec<Series> {
        let g = ("gpu", "0");
        let p = [
            g,
            ("pid", "42"),
            ("process", "train.py"),
            ("user", "ana"),
            ("rank", "1"),
        ];
        vec![
            s(
                "gpumon_gpu_info",
                &[
                    g,
                    ("uuid", "GPU-a"),
                    ("name", "H200"),
                    ("pci_bus_id", "00:06.0"),
                ],
                1.0,
            ),
            s("gpumon_gpu_memory_total_bytes", &[g], 1000.0),
            s("gpumon_gpu_memory_used_bytes", &[g], 600.0),
            s("gpumon_process_gpu_memory_used_bytes", &p, 500.0),
            s("gpumon_allocator_allocated_bytes", &p, allocated),
            s("gpumon_allocator_reserved_bytes", &p, 450.0),
            s("gpumon_allocator_free_bytes", &p, 450.0 - allocated),
            s("gpumon_allocator_largest_free_block_bytes", &p, 10.0),
            s("gpumon_allocator_last_completed_epoch", &p, done_epoch),
            s("gpumon_allocator_epoch_floor_bytes", &p, allocated),
            s("gpumon_allocator_epoch_peak_bytes", &p, allocated + 20.0),
            {
                let mut c = s("gpumon_allocator_free_block_class_blocks", &p, 3.0);
                c.labels.insert("size_min_bytes".into(), "1048576".into());
                c
            },
        ]
    }

    #[test]
    fn a_nodes_series_give_the_model_its_cards_rows_and_allocator() {
        let mut feed = NodeFeed::new("n1");
        let mut state = State::default();
        for (i, alloc) in [300.0, 320.0, 340.0].into_iter().enumerate() {
            for f in feed.frames(&answer(alloc, i as f64), 1_000 * (i as i64 + 1), 1_000) {
                state.apply(&f);
            }
        }
        assert_eq!(state.header.as_ref().map(|h| h.host.as_str()), Some("n1"));
        assert_eq!(state.gpus.len(), 1);
        assert_eq!(state.ticks, 3);
        let p = state.procs.get(&42).expect("the process row");
        assert_eq!(p.info.user.as_deref(), Some("ana"));
        let a = state
            .live_alloc_on(42, 0)
            .expect("allocator state on GPU 0");
        assert_eq!(a.last.as_ref().and_then(|s| s.allocated), Some(340));
        assert_eq!(a.epochs.len(), 3, "one epoch record per completed epoch");
    }

    #[test]
    fn an_opened_nodes_history_charts_its_processes_from_the_first_point() {
        // What the history query selects, and no more (info series included: without them
        // the live header that follows would start the model again).
        let asked = [
            "gpumon_gpu_info",
            "gpumon_gpu_memory_total_bytes",
            "gpumon_gpu_memory_used_bytes",
            "gpumon_process_gpu_memory_used_bytes",
            "gpumon_allocator_allocated_bytes",
            "gpumon_allocator_reserved_bytes",
        ];
        let q = history_query("n1");
        assert!(
            q.contains("|gpu_info|") && q.contains("process_gpu_memory_used_bytes"),
            "{q}"
        );
        let mut range: Vec<Series> = answer(300.0, 0.0)
            .into_iter()
            .filter(|s| asked.contains(&s.name()))
            .collect();
        for s in &mut range {
            s.points = (0..5).map(|i| (1_000 * i, s.points[0].1)).collect();
        }
        let mut feed = NodeFeed::new("n1");
        let mut state = State::default();
        for f in history(&mut feed, &range, 1_000) {
            state.apply(&f);
        }
        for f in feed.frames(&answer(320.0, 1.0), 5_000, 1_000) {
            state.apply(&f);
        }
        assert_eq!(state.gpus.len(), 1);
        assert_eq!(state.ticks, 6, "the live round went on from the history");
        let p = state.procs.get(&42).expect("the process");
        assert!(
            p.gpus[&0].used.len() >= 6,
            "a point for every step of the history"
        );
        let a = state.live_alloc_on(42, 0).expect("allocator");
        assert!(a.allocated.len() >= 6);
    }

    #[test]
    fn a_refresh_at_the_same_time_adds_nothing() {
        let mut feed = NodeFeed::new("n1");
        let first = feed.frames(&answer(1.0, 0.0), 5_000, 1_000);
        assert!(first.iter().any(|f| matches!(f, Frame::Header(_))));
        let again = feed.frames(&answer(1.0, 0.0), 5_000, 1_000);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn node_names_are_quoted_in_promql() {
        assert_eq!(
            node_query(r#"a"b"#),
            r#"{hostname="a\"b",__name__=~"gpumon_.+"}"#
        );
    }
}
