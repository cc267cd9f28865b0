//! The fleet's current state from one batched instant query, and which nodes Prometheus
//! still remembers.

use std::collections::BTreeMap;

use super::answer::Series;
use crate::model::alerts::Severity;
use crate::model::fleet::{Node, NodeAlert, NodeGpu, NodeProc};
use crate::model::time::Ts;

/// What the node list needs, for every node at once: one query, not one per node or GPU.
/// The allocator series, the free-block classes and the history stay out (they are read
/// for the one node a person opens).
pub const FLEET_QUERY: &str = "{__name__=~\"gpumon_(info|up|gpu_info|gpu_up|gpu_memory_(total|used)_bytes|gpu_utilization_ratio|process_gpu_memory_used_bytes|alert|alert_exhaustion_seconds)\"}";

/// Every node seen in the last hour and when it was last scraped, to 15 s: asked once at
/// start, so a node that was already gone is listed stale with its age. Later refreshes
/// keep the ages themselves.
pub const KNOWN_QUERY: &str =
    "max by (hostname, instance) (max_over_time(timestamp(gpumon_up)[1h:15s]))";

/// Nodes by name, built from the answer to [`FLEET_QUERY`].
pub fn nodes(series: &[Series]) -> Vec<Node> {
    let mut by: BTreeMap<&str, Node> = BTreeMap::new();
    for s in series {
        let Some(host) = s.label("hostname") else {
            continue;
        };
        let n = by.entry(host).or_insert_with(|| Node {
            name: host.to_string(),
            ..Node::default()
        });
        if n.instance.is_none() {
            n.instance = s.label("instance").map(str::to_string);
        }
        let v = s.value();
        let gpu = s.num::<u32>("gpu");
        match s.name() {
            "gpumon_info" => n.version = s.label("version").map(str::to_string),
            "gpumon_up" => n.up = v == Some(1.0),
            "gpumon_gpu_info" => {
                if let Some(g) = gpu_mut(n, gpu) {
                    g.name = s.label("name").map(str::to_string);
                    g.uuid = s.label("uuid").map(str::to_string);
                }
            }
            "gpumon_gpu_up" => {
                if let Some(g) = gpu_mut(n, gpu) {
                    g.up = v == Some(1.0);
                }
            }
            "gpumon_gpu_memory_total_bytes" => {
                if let Some(g) = gpu_mut(n, gpu) {
                    g.total = v.map(|v| v as u64);
                }
            }
            "gpumon_gpu_memory_used_bytes" => {
                if let Some(g) = gpu_mut(n, gpu) {
                    g.used = v.map(|v| v as u64);
                }
            }
            "gpumon_gpu_utilization_ratio" => {
                if let Some(g) = gpu_mut(n, gpu) {
                    g.util = v;
                }
            }
            "gpumon_process_gpu_memory_used_bytes" => {
                let (Some(pid), Some(gpu)) = (s.num::<u32>("pid"), gpu) else {
                    continue;
                };
                n.procs.push(NodeProc {
                    pid,
                    gpu,
                    user: s.label("user").map(str::to_string),
                    process: s.label("process").map(str::to_string),
                    rank: s.num("rank"),
                    job: s.job().map(str::to_string),
                    used: v.map(|v| v as u64),
                });
            }
            "gpumon_alert" => {
                if let Some(a) = alert(s) {
                    n.alerts.push(a);
                }
            }
            _ => {}
        }
    }
    // The forecast is its own series with the alert's labels: join it on them.
    for s in series
        .iter()
        .filter(|s| s.name() == "gpumon_alert_exhaustion_seconds")
    {
        let Some(n) = s.label("hostname").and_then(|h| by.get_mut(h)) else {
            continue;
        };
        let (kind, pid, gpu) = (s.label("kind"), s.num::<u32>("pid"), s.num::<u32>("gpu"));
        if let Some(a) = n
            .alerts
            .iter_mut()
            .find(|a| Some(a.kind.as_str()) == kind && a.pid == pid && a.gpu == gpu)
        {
            a.exhaustion_s = s.value();
        }
    }
    let mut v: Vec<Node> = by.into_values().collect();
    for n in &mut v {
        n.gpus.sort_by_key(|g| g.index);
        n.procs.sort_by_key(|p| (p.gpu, p.pid));
    }
    v
}

fn gpu_mut(n: &mut Node, index: Option<u32>) -> Option<&mut NodeGpu> {
    let index = index?;
    let i = match n.gpus.iter().position(|g| g.index == index) {
        Some(i) => i,
        None => {
            n.gpus.push(NodeGpu {
                index,
                up: true,
                ..NodeGpu::default()
            });
            n.gpus.len() - 1
        }
    };
    n.gpus.get_mut(i)
}

pub(super) fn alert(s: &Series) -> Option<NodeAlert> {
    if s.value() != Some(1.0) {
        return None;
    }
    Some(NodeAlert {
        kind: s.label("kind")?.to_string(),
        severity: Severity::parse(s.label("severity")?)?,
        gpu: s.num("gpu"),
        pid: s.num("pid"),
        exhaustion_s: None,
    })
}

/// The answer to [`KNOWN_QUERY`]: (node, last scraped, Unix ms).
pub fn known(series: &[Series]) -> Vec<(String, Ts)> {
    series
        .iter()
        .filter_map(|s| {
            let t = s.value()?;
            Some((s.label("hostname")?.to_string(), (t * 1000.0) as Ts))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, labels: &[(&str, &str)], v: f64) -> Series {
        let mut l: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert("__name__".into(), name.into());
        Series {
            labels: l,
            points: vec![(1_000, v)],
        }
    }

    #[test]
    fn one_answer_becomes_nodes_with_gpus_processes_and_alerts() {
        let h = ("hostname", "n1");
        let answer = vec![
            s("gpumon_up", &[h, ("instance", "n1:19464")], 1.0),
            s(
                "gpumon_gpu_info",
                &[h, ("gpu", "1"), ("name", "H200"), ("uuid", "GPU-b")],
                1.0,
            ),
            s("gpumon_gpu_memory_total_bytes", &[h, ("gpu", "1")], 100.0),
            s("gpumon_gpu_memory_used_bytes", &[h, ("gpu", "1")], 60.0),
            s("gpumon_gpu_memory_used_bytes", &[h, ("gpu", "0")], 5.0),
            s(
                "gpumon_process_gpu_memory_used_bytes",
                &[
                    h,
                    ("gpu", "1"),
                    ("pid", "42"),
                    ("process", "train.py"),
                    ("rank", "3"),
                    ("job", "train.py@m:1"),
                ],
                50.0,
            ),
            s(
                "gpumon_alert",
                &[
                    h,
                    ("gpu", "1"),
                    ("pid", "42"),
                    ("kind", "growth"),
                    ("severity", "warning"),
                ],
                1.0,
            ),
            s(
                "gpumon_alert_exhaustion_seconds",
                &[
                    h,
                    ("gpu", "1"),
                    ("pid", "42"),
                    ("kind", "growth"),
                    ("severity", "warning"),
                ],
                600.0,
            ),
            s("gpumon_up", &[("hostname", "n2")], 0.0),
            s("gpumon_gpu_memory_used_bytes", &[("gpu", "0")], 1.0),
        ];
        let v = nodes(&answer);
        assert_eq!(v.len(), 2, "a series without hostname is no node");
        let n1 = &v[0];
        assert_eq!(n1.instance.as_deref(), Some("n1:19464"));
        assert_eq!(n1.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(n1.gpus[1].name.as_deref(), Some("H200"));
        assert_eq!((n1.used(), n1.total()), (65, 100));
        assert_eq!(n1.procs[0].rank, Some(3));
        assert_eq!(n1.jobs(), ["train.py@m:1"]);
        let a = n1.worst_alert().expect("an alert");
        assert_eq!(
            (a.severity, a.exhaustion_s),
            (Severity::Warning, Some(600.0))
        );
        assert!(!v[1].up, "n2's sampler has not delivered");
    }
}
