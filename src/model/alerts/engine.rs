//! The alert lifecycle: rules produce findings (on inputs `assemble` puts together), the
//! engine turns them into alerts that are raised, worsen, ease and clear, holds OOM
//! events for a while, keeps a bounded history, and silences acknowledged alerts until
//! they get worse.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::model::time::Ts;

use super::assemble::Subject;
use super::config::AlertConfig;
use super::from_state;
use super::inputs::{CompanionView, ProcView, Snapshot};
use super::memory::Memory;
use super::oom::{self, OomContext};
use super::{Alert, AlertChange, AlertKey, AlertKind, ChangeKind, Finding, Severity};

#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    severity: Severity,
    steps: Option<f64>,
    count: Option<u32>,
}

impl Mark {
    fn of(a: &Alert) -> Mark {
        Mark {
            severity: a.severity,
            steps: a.forecast_steps(),
            count: a.evidence.count,
        }
    }

    /// Worse than `before`: higher severity, a forecast shrunk to `shrink` of it, or more events.
    fn worse_than(&self, before: &Mark, shrink: f64) -> bool {
        let sooner = matches!((self.steps, before.steps), (Some(n), Some(o)) if n <= o * shrink);
        let more = matches!((self.count, before.count), (Some(n), Some(o)) if n > o);
        self.severity > before.severity || sooner || more
    }
}

#[derive(Debug, Clone)]
struct Tracked {
    alert: Alert,
    /// State at the last Raised/Worsened/Eased change, so a slowly shrinking forecast
    /// reports once per halving rather than every tick.
    reported: Mark,
    ack: Option<Mark>,
}

#[derive(Debug, Clone)]
struct HeldEvent {
    finding: Finding,
    until: Ts,
}

#[derive(Debug, Clone, Default)]
pub struct AlertEngine {
    cfg: AlertConfig,
    active: BTreeMap<AlertKey, Tracked>,
    history: VecDeque<Alert>,
    /// When each condition rule was first seen true, for persistence.
    pending: BTreeMap<AlertKey, Ts>,
    /// OOM events already turned into alerts: (pid, gpu) → (newest event time, count).
    ooms_seen: BTreeMap<(u32, u32), (Ts, u32)>,
    events: BTreeMap<AlertKey, HeldEvent>,
    /// Signals followed across evaluations (retries per epoch, holes at the step's peak).
    memory: Memory,
}

impl AlertEngine {
    pub fn new(cfg: AlertConfig) -> Self {
        AlertEngine {
            cfg,
            ..AlertEngine::default()
        }
    }

    pub fn config(&self) -> &AlertConfig {
        &self.cfg
    }

    /// Evaluate every rule on the model; returns what changed since the last call.
    pub fn evaluate(&mut self, state: &crate::model::state::State) -> Vec<AlertChange> {
        let snap = from_state::snapshot(state, &self.cfg);
        self.evaluate_snapshot(&snap)
    }

    /// Evaluate every rule on plain inputs (tests, synthetic runs).
    pub fn evaluate_snapshot(&mut self, s: &Snapshot) -> Vec<AlertChange> {
        let now = s.now;
        let mut findings = Vec::new();
        let mut conditions = Vec::new();
        // A process that exited raises nothing more, and its alerts (held OOM events too)
        // end now, saying why, into history.
        let exited: BTreeSet<u32> = s.procs.iter().filter(|p| p.exited).map(|p| p.pid).collect();
        self.events
            .retain(|k, _| k.pid.is_none_or(|pid| !exited.contains(&pid)));
        for p in s.procs.iter().filter(|p| !p.exited) {
            self.memory.observe(p);
        }
        let live: Vec<(u32, u32)> = s.procs.iter().map(|p| (p.pid, p.gpu)).collect();
        self.memory.retain(&live);
        for p in s.procs.iter().filter(|p| !p.exited) {
            let subject = self.subject(s, p);
            let growth = subject.growth();
            conditions.extend(subject.conditions());
            if let Some(c) = &p.companion {
                let ctx = subject.oom_context(growth.as_ref());
                self.take_ooms(p, c, now, &ctx);
            }
            findings.extend(growth);
        }
        findings.extend(super::assemble::divergent_ranks(s, &self.cfg));
        // Persistence: a condition must hold at every evaluation for its period.
        let true_now: BTreeSet<AlertKey> = conditions.iter().map(|(f, _)| f.key).collect();
        self.pending.retain(|k, _| true_now.contains(k));
        for (f, persist) in conditions {
            let since = *self.pending.entry(f.key).or_insert(now);
            if now - since >= persist || self.active.contains_key(&f.key) {
                findings.push(f);
            }
        }
        self.events.retain(|_, e| e.until >= now);
        findings.extend(self.events.values().map(|e| e.finding.clone()));
        let gone: BTreeSet<u32> = self
            .active
            .keys()
            .filter_map(|k| k.pid)
            .filter(|pid| exited.contains(pid) || !s.procs.iter().any(|p| p.pid == *pid))
            .collect();
        self.reconcile(now, findings, &gone)
    }

    /// The rules' view of `p`: the snapshot, and the engine's active alerts and memory.
    fn subject<'a>(&'a self, s: &'a Snapshot, p: &'a ProcView) -> Subject<'a> {
        Subject {
            snap: s,
            proc: p,
            gpu: s.gpus.iter().find(|g| g.index == p.gpu),
            cfg: &self.cfg,
            memory: &self.memory,
            active: self
                .active
                .values()
                .map(|t| &t.alert)
                .filter(|a| a.pid == Some(p.pid) && a.gpu == p.gpu)
                .collect(),
        }
    }

    fn take_ooms(&mut self, p: &ProcView, c: &CompanionView, now: Ts, ctx: &OomContext) {
        let (mut last_t, mut count) = self
            .ooms_seen
            .get(&(p.pid, p.gpu))
            .copied()
            .unwrap_or((Ts::MIN, 0));
        let seen_until = last_t;
        for ev in c.ooms.iter().filter(|e| e.t > seen_until) {
            count += 1;
            last_t = ev.t;
            let f = oom::oom(p.pid, p.gpu, ev, &c.runtime, count, ctx);
            // Both kinds share one slot per process so a later plain OOM replaces a
            // fragmentation OOM instead of showing two.
            for kind in [AlertKind::FragmentationOom, AlertKind::Oom] {
                if kind != f.key.kind {
                    self.events.remove(&AlertKey {
                        kind,
                        pid: Some(p.pid),
                        gpu: p.gpu,
                    });
                }
            }
            // An OOM from the companion's history is still raised once, then cleared.
            let until =
                ev.t.saturating_add(self.cfg.fragmentation.oom_hold_ms)
                    .max(now);
            self.events.insert(f.key, HeldEvent { finding: f, until });
        }
        self.ooms_seen.insert((p.pid, p.gpu), (last_t, count));
    }

    /// `exited`: processes that are gone; their alerts clear with "ended: process exited".
    fn reconcile(
        &mut self,
        now: Ts,
        findings: Vec<Finding>,
        exited: &BTreeSet<u32>,
    ) -> Vec<AlertChange> {
        let shrink = self.cfg.engine.ack_forecast_shrink;
        let mut changes = Vec::new();
        let mut seen = BTreeSet::new();
        for f in findings {
            if !seen.insert(f.key) {
                continue;
            }
            match self.active.get_mut(&f.key) {
                None => {
                    let alert = Alert {
                        kind: f.key.kind,
                        severity: f.severity,
                        pid: f.key.pid,
                        gpu: f.key.gpu,
                        message: f.message,
                        summary: f.summary,
                        evidence: f.evidence,
                        raised_at: now,
                        raised_epoch: f.epoch,
                        updated_at: now,
                        cleared_at: None,
                        silenced: false,
                    };
                    let reported = Mark::of(&alert);
                    changes.push(AlertChange {
                        change: ChangeKind::Raised,
                        at: now,
                        alert: alert.clone(),
                    });
                    self.active.insert(
                        f.key,
                        Tracked {
                            alert,
                            reported,
                            ack: None,
                        },
                    );
                }
                Some(tr) => {
                    let a = &mut tr.alert;
                    a.severity = f.severity;
                    a.message = f.message;
                    a.summary = f.summary;
                    a.evidence = f.evidence;
                    a.updated_at = now;
                    let mark = Mark::of(a);
                    if tr.ack.is_some_and(|ack| mark.worse_than(&ack, shrink)) {
                        tr.ack = None;
                    }
                    a.silenced = tr.ack.is_some();
                    let change = if mark.worse_than(&tr.reported, shrink) {
                        Some(ChangeKind::Worsened)
                    } else if mark.severity < tr.reported.severity {
                        Some(ChangeKind::Eased)
                    } else {
                        None
                    };
                    if let Some(change) = change {
                        tr.reported = mark;
                        changes.push(AlertChange {
                            change,
                            at: now,
                            alert: a.clone(),
                        });
                    }
                }
            }
        }
        let gone: Vec<AlertKey> = self
            .active
            .keys()
            .filter(|k| !seen.contains(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(mut tr) = self.active.remove(&k) {
                tr.alert.cleared_at = Some(now);
                tr.alert.updated_at = now;
                if k.pid.is_some_and(|p| exited.contains(&p)) {
                    tr.alert.message.push_str(" (ended: process exited)");
                }
                changes.push(AlertChange {
                    change: ChangeKind::Cleared,
                    at: now,
                    alert: tr.alert.clone(),
                });
                self.push_history(tr.alert);
            }
        }
        changes
    }

    fn push_history(&mut self, a: Alert) {
        while self.history.len() >= self.cfg.engine.history.max(1) {
            self.history.pop_front();
        }
        self.history.push_back(a);
    }

    /// Alerts another gpumon raised, read from its metrics, in place of this engine's own
    /// rules: they go through the same lifecycle (raised, worsened, eased, cleared into
    /// history, acknowledged), so the bar and the panel treat them alike.
    pub fn adopt(&mut self, now: Ts, findings: Vec<Finding>) -> Vec<AlertChange> {
        self.reconcile(now, findings, &BTreeSet::new())
    }

    /// Silence an active alert until it worsens. False when it is not active.
    pub fn ack(&mut self, key: &AlertKey) -> bool {
        match self.active.get_mut(key) {
            Some(tr) => {
                tr.ack = Some(Mark::of(&tr.alert));
                tr.alert.silenced = true;
                true
            }
            None => false,
        }
    }

    /// Acknowledge every active alert; returns how many.
    pub fn ack_all(&mut self) -> usize {
        let keys: Vec<AlertKey> = self.active.keys().copied().collect();
        keys.iter().filter(|k| self.ack(k)).count()
    }

    /// Active alerts, most severe first, then oldest first.
    pub fn active(&self) -> Vec<&Alert> {
        let mut v: Vec<&Alert> = self.active.values().map(|t| &t.alert).collect();
        v.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.raised_at.cmp(&b.raised_at))
                .then(a.key().cmp(&b.key()))
        });
        v
    }

    /// Active alerts that are not silenced, in `active` order: what the alert bar shows.
    pub fn visible(&self) -> Vec<&Alert> {
        self.active().into_iter().filter(|a| !a.silenced).collect()
    }

    /// Cleared alerts, newest first.
    pub fn history(&self) -> impl Iterator<Item = &Alert> {
        self.history.iter().rev()
    }

    /// Every alert a person can list, in order: active (most severe first), then past
    /// ones, newest first (the alert panel's rows).
    pub fn listed(&self) -> Vec<&Alert> {
        let mut v = self.active();
        v.extend(self.history());
        v
    }

    pub fn get(&self, key: &AlertKey) -> Option<&Alert> {
        self.active.get(key).map(|t| &t.alert)
    }
}
