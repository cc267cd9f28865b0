//! The fleet a Prometheus server holds: every node that runs `gpumon serve`, its GPUs,
//! processes and alerts, as of the newest answer. Plain data: the Prometheus source fills
//! it, the node list reads it.
//!
//! A node missing from the newest answer is kept with its last values and marked stale
//! with their age, never shown as current: a node whose exporter stopped is exactly the one
//! a person needs to see.

use std::collections::BTreeMap;

use crate::model::alerts::{AlertKey, AlertKind, Basis, Evidence, Finding, SUMMARY_MAX, Severity};
use crate::model::time::Ts;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    pub nodes: BTreeMap<String, Node>,
    /// Evaluation time of the newest answer, Unix ms (0 before the first).
    pub at: Ts,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub name: String,
    /// Prometheus's `instance` of the exporter (where to `ssh`, what to look up).
    pub instance: Option<String>,
    pub version: Option<String>,
    /// Sorted by index.
    pub gpus: Vec<NodeGpu>,
    pub procs: Vec<NodeProc>,
    pub alerts: Vec<NodeAlert>,
    /// `gpumon_up`: its sampler delivered a sample.
    pub up: bool,
    /// When the node's series were last in an answer, Unix ms: `Fleet::at` when current.
    pub seen: Ts,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeGpu {
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub used: Option<u64>,
    pub total: Option<u64>,
    /// 0–1.
    pub util: Option<f64>,
    /// `gpumon_gpu_up`: false when the node's NVML could not read it.
    pub up: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeProc {
    pub pid: u32,
    pub gpu: u32,
    pub user: Option<String>,
    pub process: Option<String>,
    pub rank: Option<u32>,
    pub job: Option<String>,
    pub used: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeAlert {
    pub kind: String,
    pub severity: Severity,
    pub gpu: Option<u32>,
    pub pid: Option<u32>,
    pub exhaustion_s: Option<f64>,
}

impl NodeAlert {
    /// The alert as the node's screens show it: same kind, severity, GPU and process, with
    /// a message that says where it was raised and where its evidence is.
    pub fn finding(&self, node: &Node) -> Option<Finding> {
        let kind: AlertKind =
            serde_json::from_value(serde_json::Value::String(self.kind.clone())).ok()?;
        let gpu = self.gpu.unwrap_or(0);
        let who = match self.pid.and_then(|pid| {
            node.proc_on(pid, gpu)
                .or(node.procs.iter().find(|p| p.pid == pid))
        }) {
            Some(p) => format!("PID {} ({})", p.pid, p.process.as_deref().unwrap_or("?")),
            None => self.pid.map_or("the card".into(), |p| format!("PID {p}")),
        };
        let when = self
            .exhaustion_s
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| (s * 1000.0) as i64);
        let mut message = format!(
            "{} on GPU {gpu}, {who}: raised by gpumon on {}.",
            kind.label(),
            node.name
        );
        if let Some(ms) = when {
            message.push_str(&format!(
                " It forecasts memory runs out in {}.",
                crate::fmt::rough_duration(ms)
            ));
        }
        message.push_str(&format!(
            " Its evidence (epochs, trend, block map) is on the node: ssh {} gpumon",
            node.name
        ));
        let mut summary = match when {
            Some(ms) => format!("{} OOM {}", kind.label(), crate::fmt::rough_duration(ms)),
            None => format!("{} on {}", kind.label(), node.name),
        };
        if summary.chars().count() > SUMMARY_MAX {
            summary = summary.chars().take(SUMMARY_MAX).collect();
        }
        Some(Finding {
            key: AlertKey {
                kind,
                pid: self.pid,
                gpu,
            },
            severity: self.severity,
            message,
            summary,
            evidence: Evidence {
                basis: Basis::Remote,
                ..Evidence::default()
            },
            epoch: None,
        })
    }
}

impl Node {
    /// How long ago the node was last in an answer, when it is not in the newest one.
    pub fn stale_ms(&self, fleet_at: Ts) -> Option<i64> {
        (self.seen < fleet_at).then(|| fleet_at - self.seen)
    }

    pub fn used(&self) -> u64 {
        self.gpus.iter().filter_map(|g| g.used).sum()
    }

    pub fn total(&self) -> u64 {
        self.gpus.iter().filter_map(|g| g.total).sum()
    }

    /// The fullest GPU's used share, 0–1: what runs out first on this node.
    pub fn fullest(&self) -> Option<f64> {
        self.gpus
            .iter()
            .filter_map(|g| Some(g.used? as f64 / g.total.filter(|t| *t > 0)? as f64))
            .max_by(f64::total_cmp)
    }

    /// The most severe alert, the soonest forecast first among equals.
    pub fn worst_alert(&self) -> Option<&NodeAlert> {
        self.alerts.iter().max_by(|a, b| {
            a.severity.cmp(&b.severity).then(
                b.exhaustion_s
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&a.exhaustion_s.unwrap_or(f64::INFINITY)),
            )
        })
    }

    /// The distributed jobs with a rank here, by name.
    pub fn jobs(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.procs.iter().filter_map(|p| p.job.as_deref()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The program a process runs, for a node without distributed jobs.
    pub fn programs(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .procs
            .iter()
            .filter_map(|p| p.process.as_deref())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    pub fn proc_on(&self, pid: u32, gpu: u32) -> Option<&NodeProc> {
        self.procs.iter().find(|p| p.pid == pid && p.gpu == gpu)
    }
}

/// What the node list is ordered by; every order puts stale nodes after current ones of
/// the same rank only where it says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeSort {
    /// Worst alert, then stale, then the fullest GPU: what needs a person first.
    #[default]
    Worst,
    /// The fullest GPU's share.
    Fullest,
    /// Memory used on the node.
    Used,
    Name,
}

impl NodeSort {
    pub const ALL: [NodeSort; 4] = [
        NodeSort::Worst,
        NodeSort::Fullest,
        NodeSort::Used,
        NodeSort::Name,
    ];

    pub fn label(self) -> &'static str {
        match self {
            NodeSort::Worst => "worst",
            NodeSort::Fullest => "full%",
            NodeSort::Used => "used",
            NodeSort::Name => "name",
        }
    }

    pub fn next(self) -> NodeSort {
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

/// A node selector as people type it: `node=PAT job=PAT user=PAT` and bare words, all of
/// which must match. A pattern matches a substring, or with `*` a glob (`gpu-a*`); a bare
/// word matches the node, a job, a user or a program.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    terms: Vec<(Field, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Node,
    Job,
    User,
    Any,
}

impl Selector {
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        for word in s.split_whitespace() {
            let (field, pat) = match word.split_once('=') {
                Some(("node" | "host" | "hostname", p)) => (Field::Node, p),
                Some(("job", p)) => (Field::Job, p),
                Some(("user", p)) => (Field::User, p),
                Some((k, _)) => {
                    return Err(format!(
                        "unknown selector `{k}=`: node=, job= or user= (or a bare word)"
                    ));
                }
                None => (Field::Any, word),
            };
            if pat.is_empty() {
                return Err(format!(
                    "`{word}` selects nothing: give a pattern after `=`"
                ));
            }
            terms.push((field, pat.to_lowercase()));
        }
        Ok(Selector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, n: &Node) -> bool {
        self.terms.iter().all(|(field, pat)| {
            let node = || glob(pat, &n.name);
            let job = || {
                n.procs
                    .iter()
                    .any(|p| p.job.as_deref().is_some_and(|j| glob(pat, j)))
            };
            let user = || {
                n.procs
                    .iter()
                    .any(|p| p.user.as_deref().is_some_and(|u| glob(pat, u)))
            };
            let program = || {
                n.procs
                    .iter()
                    .any(|p| p.process.as_deref().is_some_and(|u| glob(pat, u)))
            };
            match field {
                Field::Node => node(),
                Field::Job => job(),
                Field::User => user(),
                Field::Any => node() || job() || user() || program(),
            }
        })
    }
}

/// Case-insensitive: a substring without `*`, else a glob over the whole text.
fn glob(pat: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    if !pat.contains('*') {
        return text.contains(pat);
    }
    let parts: Vec<&str> = pat.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// One distributed job across the fleet: its ranks on every node.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetJob {
    pub name: String,
    /// (node, pid, gpu, rank), by rank.
    pub ranks: Vec<(String, u32, u32, Option<u32>)>,
    pub nodes: usize,
    pub used: u64,
    /// The rank using most memory, and how much.
    pub top: Option<(String, u32, u64)>,
    pub worst: Option<Severity>,
    /// Some rank's node is stale.
    pub stale: bool,
}

impl Fleet {
    /// Fold in an answer: `fresh` holds every node in it, current at `at`. Nodes missing
    /// from it keep their last values and their `seen`; `known` names nodes Prometheus
    /// still remembers (seen within its lookback) with when each was last seen, so a node
    /// that was gone before gpumon started is listed stale too.
    pub fn merge(&mut self, fresh: Vec<Node>, known: &[(String, Ts)], at: Ts) {
        self.at = at;
        for mut n in fresh {
            n.seen = at;
            self.nodes.insert(n.name.clone(), n);
        }
        for (name, seen) in known {
            self.nodes.entry(name.clone()).or_insert_with(|| Node {
                name: name.clone(),
                seen: (*seen).min(at - 1),
                ..Node::default()
            });
        }
    }

    /// Forget nodes stale for longer than `keep_ms` (a node taken out of the fleet).
    pub fn prune(&mut self, keep_ms: i64) {
        let at = self.at;
        self.nodes.retain(|_, n| at - n.seen <= keep_ms);
    }

    /// The node list: selected, then ordered by `sort` (name breaks ties).
    pub fn rows(&self, sort: NodeSort, invert: bool, sel: &Selector) -> Vec<&Node> {
        let mut v: Vec<&Node> = self.nodes.values().filter(|n| sel.matches(n)).collect();
        let at = self.at;
        let key = |n: &Node| -> (u8, bool, f64) {
            let sev = n.worst_alert().map_or(0, |a| a.severity as u8 + 1);
            (sev, n.stale_ms(at).is_some(), n.fullest().unwrap_or(0.0))
        };
        v.sort_by(|a, b| {
            let o = match sort {
                NodeSort::Worst => {
                    let (ka, kb) = (key(a), key(b));
                    kb.0.cmp(&ka.0)
                        .then(kb.1.cmp(&ka.1))
                        .then(kb.2.total_cmp(&ka.2))
                }
                NodeSort::Fullest => b
                    .fullest()
                    .unwrap_or(0.0)
                    .total_cmp(&a.fullest().unwrap_or(0.0)),
                NodeSort::Used => b.used().cmp(&a.used()),
                NodeSort::Name => a.name.cmp(&b.name),
            };
            let o = if invert { o.reverse() } else { o };
            o.then_with(|| a.name.cmp(&b.name))
        });
        v
    }

    pub fn gpus(&self) -> usize {
        self.nodes.values().map(|n| n.gpus.len()).sum()
    }

    /// Every active alert with its node, most severe first, then the soonest forecast.
    pub fn alerts(&self) -> Vec<(&Node, &NodeAlert)> {
        let mut v: Vec<(&Node, &NodeAlert)> = self
            .nodes
            .values()
            .flat_map(|n| n.alerts.iter().map(move |a| (n, a)))
            .collect();
        v.sort_by(|(na, a), (nb, b)| {
            b.severity
                .cmp(&a.severity)
                .then(
                    a.exhaustion_s
                        .unwrap_or(f64::INFINITY)
                        .total_cmp(&b.exhaustion_s.unwrap_or(f64::INFINITY)),
                )
                .then(na.name.cmp(&nb.name))
        });
        v
    }

    /// Distributed jobs across nodes (the `job` label every rank carries), largest first.
    pub fn jobs(&self) -> Vec<FleetJob> {
        let mut by: BTreeMap<&str, FleetJob> = BTreeMap::new();
        for n in self.nodes.values() {
            let stale = n.stale_ms(self.at).is_some();
            for p in &n.procs {
                let Some(name) = p.job.as_deref() else {
                    continue;
                };
                let j = by.entry(name).or_insert_with(|| FleetJob {
                    name: name.to_string(),
                    ranks: Vec::new(),
                    nodes: 0,
                    used: 0,
                    top: None,
                    worst: None,
                    stale: false,
                });
                j.ranks.push((n.name.clone(), p.pid, p.gpu, p.rank));
                let used = p.used.unwrap_or(0);
                j.used += used;
                if j.top.as_ref().is_none_or(|t| used > t.2) {
                    j.top = Some((n.name.clone(), p.pid, used));
                }
                j.stale |= stale;
                let sev = n
                    .alerts
                    .iter()
                    .filter(|a| a.pid == Some(p.pid))
                    .map(|a| a.severity)
                    .max();
                j.worst = j.worst.max(sev);
            }
        }
        let mut v: Vec<FleetJob> = by
            .into_values()
            .map(|mut j| {
                j.ranks.sort_by(|a, b| a.3.cmp(&b.3).then(a.0.cmp(&b.0)));
                let mut nodes: Vec<&str> = j.ranks.iter().map(|r| r.0.as_str()).collect();
                nodes.sort_unstable();
                nodes.dedup();
                j.nodes = nodes.len();
                j
            })
            .collect();
        v.sort_by(|a, b| b.worst.cmp(&a.worst).then(b.used.cmp(&a.used)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, used: u64, alerts: Vec<NodeAlert>) -> Node {
        Node {
            name: name.into(),
            gpus: vec![NodeGpu {
                index: 0,
                used: Some(used),
                total: Some(100),
                up: true,
                ..NodeGpu::default()
            }],
            procs: vec![NodeProc {
                pid: 7,
                gpu: 0,
                user: Some("ana".into()),
                process: Some("train.py".into()),
                rank: Some(name.len() as u32),
                job: Some("train.py@10.0.0.1:29500".into()),
                used: Some(used),
            }],
            alerts,
            up: true,
            ..Node::default()
        }
    }

    fn alert(sev: Severity, secs: Option<f64>) -> NodeAlert {
        NodeAlert {
            kind: "growth".into(),
            severity: sev,
            gpu: Some(0),
            pid: Some(7),
            exhaustion_s: secs,
        }
    }

    #[test]
    fn a_node_missing_from_the_answer_is_kept_and_marked_stale_with_its_age() {
        let mut f = Fleet::default();
        f.merge(
            vec![node("a", 10, vec![]), node("b", 20, vec![])],
            &[],
            1_000,
        );
        f.merge(vec![node("a", 11, vec![])], &[], 6_000);
        assert_eq!(f.nodes["a"].stale_ms(f.at), None);
        assert_eq!(f.nodes["b"].stale_ms(f.at), Some(5_000), "b kept, 5 s old");
        assert_eq!(f.nodes["b"].used(), 20, "its last values, not zero");
        f.prune(4_000);
        assert!(
            !f.nodes.contains_key("b"),
            "forgotten once stale past the keep"
        );
    }

    #[test]
    fn a_node_prometheus_remembers_but_gpumon_never_saw_is_listed_stale() {
        let mut f = Fleet::default();
        f.merge(vec![node("a", 10, vec![])], &[("gone".into(), 400)], 1_000);
        assert_eq!(f.nodes["gone"].stale_ms(1_000), Some(600));
        assert!(f.nodes["gone"].gpus.is_empty());
    }

    #[test]
    fn the_worst_node_comes_first_then_stale_then_fullest() {
        let mut f = Fleet::default();
        f.merge(
            vec![
                node("calm", 90, vec![]),
                node("warned", 10, vec![alert(Severity::Warning, Some(600.0))]),
                node("critical", 5, vec![alert(Severity::Critical, None)]),
                node("empty", 1, vec![]),
            ],
            &[],
            1_000,
        );
        f.merge(
            vec![
                node("calm", 90, vec![]),
                node("warned", 10, vec![alert(Severity::Warning, Some(600.0))]),
                node("critical", 5, vec![alert(Severity::Critical, None)]),
            ],
            &[],
            2_000,
        );
        let names: Vec<&str> = f
            .rows(NodeSort::Worst, false, &Selector::default())
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(names, ["critical", "warned", "empty", "calm"]);
        let by_name: Vec<&str> = f
            .rows(NodeSort::Name, true, &Selector::default())
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(by_name, ["warned", "empty", "critical", "calm"]);
    }

    #[test]
    fn selectors_pick_nodes_by_node_job_and_user() {
        let mut f = Fleet::default();
        let mut b = node("gpu-b7", 1, vec![]);
        b.procs[0].user = Some("bo".into());
        b.procs[0].job = Some("eval.py@x".into());
        b.procs[0].process = Some("eval.py".into());
        f.merge(vec![node("gpu-a1", 1, vec![]), b], &[], 1);
        let pick = |s: &str| -> Vec<String> {
            let sel = Selector::parse(s).expect("parses");
            f.rows(NodeSort::Name, false, &sel)
                .iter()
                .map(|n| n.name.clone())
                .collect()
        };
        assert_eq!(pick("node=gpu-a*"), ["gpu-a1"]);
        assert_eq!(pick("node=*7"), ["gpu-b7"]);
        assert_eq!(pick("job=eval"), ["gpu-b7"]);
        assert_eq!(pick("user=ana"), ["gpu-a1"]);
        assert_eq!(pick("train.py"), ["gpu-a1"], "a bare word: program or job");
        assert_eq!(pick("gpu user=bo"), ["gpu-b7"], "every term must match");
        assert!(Selector::parse("rack=3").is_err());
        assert!(Selector::parse("node=").is_err());
    }

    #[test]
    fn a_job_spanning_nodes_is_one_job_with_its_ranks_on_each() {
        let mut f = Fleet::default();
        f.merge(
            vec![
                node("n1", 30, vec![]),
                node("n22", 50, vec![alert(Severity::Warning, None)]),
            ],
            &[],
            1,
        );
        let jobs = f.jobs();
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!((j.nodes, j.used, j.ranks.len()), (2, 80, 2));
        assert_eq!(j.ranks[0].0, "n1", "ordered by rank");
        assert_eq!(j.top.as_ref().map(|t| t.0.as_str()), Some("n22"));
        assert_eq!(j.worst, Some(Severity::Warning));
    }

    #[test]
    fn a_remote_alert_reads_like_a_local_one_and_says_where_it_was_raised() {
        let n = node("n7", 50, vec![alert(Severity::Warning, Some(3600.0))]);
        let f = n.alerts[0].finding(&n).expect("a known kind");
        assert_eq!(f.key.kind, AlertKind::Growth);
        assert_eq!((f.key.pid, f.key.gpu), (Some(7), 0));
        assert!(
            f.message.contains("raised by gpumon on n7"),
            "{}",
            f.message
        );
        assert!(f.message.contains("ssh n7 gpumon"), "{}", f.message);
        assert!(f.summary.chars().count() <= SUMMARY_MAX);
        assert_eq!(f.evidence.basis, Basis::Remote);
        let mut odd = n.alerts[0].clone();
        odd.kind = "from_a_newer_gpumon".into();
        assert!(
            odd.finding(&n).is_none(),
            "an unknown kind is not guessed at"
        );
    }

    #[test]
    fn glob_patterns() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*", "a"));
        assert!(!glob("a*b*c", "acb"));
        assert!(glob("*b*", "abc"));
        assert!(!glob("ab*ba", "aba"), "the ends may not overlap");
    }
}
