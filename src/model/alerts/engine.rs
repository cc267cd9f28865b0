//! The alert lifecycle: rules produce findings, the engine turns them into alerts that
//! are raised, worsen, ease and clear, keeps a bounded history, and silences
//! acknowledged alerts until they get worse.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::model::time::Ts;

use super::config::AlertConfig;
use super::fragmentation::{self, FragInput, LeakNote, OomContext, RequestSource};
use super::from_state;
use super::grab_all::{self, GrabInput};
use super::growth::{self, Ceiling, GrowthContext, WindowSource};
use super::headroom::{self, HeadroomInput};
use super::inputs::{CompanionView, GpuView, ProcView, Snapshot};
use super::memory::Memory;
use super::{
    Alert, AlertChange, AlertKey, AlertKind, Basis, CeilingSource, ChangeKind, Finding, Gate,
    GateName, Named, Severity, StepUnit, TrendSeries, ValueName,
};
use crate::fmt::compact;

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
            let g = s.gpus.iter().find(|g| g.index == p.gpu);
            let growth = self.growth(p, g);
            conditions.extend(self.conditions(p, g));
            if let Some(c) = &p.companion {
                let ctx = self.oom_context(s, p, g, growth.as_ref());
                self.take_ooms(p, c, now, &ctx);
            }
            findings.extend(growth);
        }
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

    fn growth(&self, p: &ProcView, g: Option<&GpuView>) -> Option<Finding> {
        let cfg = &self.cfg.growth;
        let total = g.map_or(0, |g| g.total);
        let active = |kind| {
            self.active.contains_key(&AlertKey {
                kind,
                pid: Some(p.pid),
                gpu: p.gpu,
            })
        };
        let mut ctx = GrowthContext {
            pid: p.pid,
            gpu: p.gpu,
            capacity: total,
            ceiling: None,
            current_epoch: None,
            last_epoch: None,
            growth_active: active(AlertKind::Growth),
            cache_active: active(AlertKind::CacheGrowth),
        };
        let free = g.and_then(|g| g.free);
        if let Some(c) = &p.companion {
            ctx.capacity = c
                .limit
                .map_or(total, |l| if total > 0 { l.min(total) } else { l });
            ctx.ceiling = allocator_ceiling(c, free, total);
            ctx.current_epoch = c.current_epoch.or(c.epochs.last().map(|e| e.epoch));
            ctx.last_epoch = c.last_epoch;
            if !c.epochs.is_empty() {
                return growth::epoch_growth(&c.epochs, c.baseline_from, &ctx, cfg);
            }
            if !c.allocated_windows.is_empty() && p.nvml_epochs.is_empty() {
                return growth::window_growth(
                    &c.allocated_windows,
                    if c.interposer {
                        WindowSource::Exact
                    } else {
                        WindowSource::Allocated
                    },
                    &ctx,
                    cfg,
                );
            }
        }
        ctx.ceiling = match (p.nvml_used, free) {
            (Some(u), Some(f)) => Some(Ceiling {
                bytes: u.saturating_add(f),
                source: CeilingSource::CardNotHeld,
            }),
            _ if total > 0 => Some(Ceiling {
                bytes: total,
                source: CeilingSource::CardTotal,
            }),
            _ => None,
        };
        if !p.nvml_epochs.is_empty() {
            // Epoch markers without a readable framework: NVML's bytes at each marker are
            // the floor. Coarser than an allocator's floor (the cache and the context are
            // in it), and the message says so.
            ctx.current_epoch = p.nvml_epochs.last().map(|e| e.epoch);
            return growth::epoch_growth(&p.nvml_epochs, None, &ctx, cfg).map(|mut f| {
                f.message = f.message.replace(
                    "the allocated floor at each epoch end",
                    "the process's NVML usage at each epoch marker (no framework gpumon can read: the allocator's cache and the CUDA context are in it)",
                );
                f.evidence.series = Some(TrendSeries::NvmlEpochs);
                f.evidence.basis = Basis::Nvml;
                f
            });
        }
        growth::window_growth(&p.nvml_windows, WindowSource::Nvml, &ctx, cfg)
    }

    /// Rules that must persist before they are raised, with their persistence period.
    fn conditions(&self, p: &ProcView, g: Option<&GpuView>) -> Vec<(Finding, i64)> {
        let mut out = Vec::new();
        let free = g.and_then(|g| g.free);
        let total = g.map_or(0, |g| g.total);
        if let Some(c) = &p.companion {
            let epoch = c.current_epoch;
            let d = p.device_avail(free);
            let request = largest_request(c);
            let t = c
                .frag
                .map(|f| f.free_total)
                .or_else(|| Some(c.reserved?.saturating_sub(c.allocated?)));
            if let (Some(d), Some((r, src)), Some(t)) = (d, request, t) {
                let l = c.frag.and_then(|f| f.largest_free);
                let fi = FragInput {
                    free_total: t,
                    largest_free: l,
                    device_avail: d,
                    request: r,
                    request_source: src,
                };
                let fc = &self.cfg.fragmentation;
                if let Some(f) = fragmentation::risk(p.pid, p.gpu, &fi, &c.runtime, epoch) {
                    out.push((f, fc.persist_ms));
                } else if let Some(f) = self.retry_risk(p, c, &fi, epoch) {
                    // Already an event, not a reading: no persistence needed.
                    out.push((f, 0));
                }
                let hi = HeadroomInput {
                    free_total: t,
                    largest_free: l,
                    device_avail: d,
                    request: r,
                };
                if let Some(f) = headroom::check(p.pid, p.gpu, &hi, epoch) {
                    out.push((f, self.cfg.headroom.persist_ms));
                }
            }
        }
        let held = p.nvml_used_min_recent.or(p.nvml_used);
        if let Some(held) = held {
            let input = GrabInput {
                held,
                total,
                allocator_used: p.companion.as_ref().and_then(|c| c.allocated),
                card_free: free,
                policy: p.companion.as_ref().and_then(|c| c.policy.clone()),
                settings: p
                    .companion
                    .as_ref()
                    .map(|c| c.settings.clone())
                    .unwrap_or_default(),
            };
            let rt = p
                .companion
                .as_ref()
                .map(|c| c.runtime.clone())
                .unwrap_or_default();
            if let Some(f) = grab_all::check(p.pid, p.gpu, &input, &rt, &self.cfg.grab_all) {
                out.push((f, self.cfg.grab_all.persist_ms));
            }
        }
        out
    }

    /// Fragmentation risk from the allocator's own distress (issue 13, item 2): it had to
    /// flush its cache and retry during the last epochs (`num_alloc_retries` rose), the
    /// largest request fits in no hole at the step's peak (the lowest L read since the
    /// previous epoch end), and the free pieces are a real share of the cache, not the
    /// slack a caching allocator keeps mid-step: at least `oom_free_multiple` × the request
    /// and `min_free_share` of reserved. A leak running into its cap also causes retries,
    /// but leaves little free; a full card too (T 1.0–1.5 × the request on the first
    /// corpus).
    fn retry_risk(
        &self,
        p: &ProcView,
        c: &CompanionView,
        fi: &FragInput,
        epoch: Option<u64>,
    ) -> Option<Finding> {
        let fc = &self.cfg.fragmentation;
        // Once raised it stays while the pieces still cannot serve R: the retries that
        // showed the distress come every few epochs, the stranded cache stays (without
        // this the demo's alert cleared and came back every 5 s).
        let active = self.active.contains_key(&AlertKey {
            kind: AlertKind::FragmentationRisk,
            pid: Some(p.pid),
            gpu: p.gpu,
        });
        let retries = self.memory.recent_retries(p.pid, p.gpu)?;
        let hole = match (self.memory.smallest_hole(p.pid, p.gpu), fi.largest_free) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let reserved = c.reserved?;
        let (t, r) = (fi.free_total, fi.request);
        let pieces = t as f64 >= fc.oom_free_multiple * r as f64
            && t as f64 >= fc.min_free_share * reserved as f64;
        if (retries == 0 && !active) || r <= hole || !pieces {
            return None;
        }
        let mut f = fragmentation::risk(
            p.pid,
            p.gpu,
            &FragInput {
                largest_free: Some(hole),
                device_avail: 0,
                ..*fi
            },
            &c.runtime,
            epoch,
        )?;
        let distress = match retries {
            0 => {
                "had to flush its cache and retry in earlier epochs (num_alloc_retries)".to_string()
            }
            1 => "had to flush its cache and retry once in the last epochs (num_alloc_retries)"
                .to_string(),
            n => format!(
                "had to flush its cache and retry {n} times in the last epochs (num_alloc_retries)"
            ),
        };
        f.message = format!(
            "PID {} on GPU {}: the allocator {distress}, it holds {} free but its largest hole at the step's peak is {}, so the next {} request ({}) fits in no hole and only a flush can make room: an OOM from fragmentation is likely. {}",
            p.pid,
            p.gpu,
            compact(t),
            compact(hole),
            compact(r),
            fi.request_source.words(),
            fragmentation::advice(&c.runtime)
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
            threshold: fc.min_free_share,
            passed: true,
        });
        f.evidence.values.retain(|v| v.name != ValueName::FromCard);
        f.evidence.values.push(Named {
            name: ValueName::FromCard,
            bytes: fi.device_avail,
        });
        Some(f)
    }

    /// What an OOM alert needs besides the event: an active (or just found) leak on the
    /// process, and who else holds the card.
    fn oom_context(
        &self,
        s: &Snapshot,
        p: &ProcView,
        g: Option<&GpuView>,
        growth: Option<&Finding>,
    ) -> OomContext {
        let key = AlertKey {
            kind: AlertKind::Growth,
            pid: Some(p.pid),
            gpu: p.gpu,
        };
        let leak = match (self.active.get(&key), growth) {
            (Some(tr), _) => Some((tr.alert.raised_epoch, &tr.alert.evidence)),
            (None, Some(f)) if f.key == key => Some((f.epoch, &f.evidence)),
            _ => None,
        }
        .map(|(since_epoch, ev)| LeakNote {
            since_epoch,
            rate: ev.slope.unwrap_or(0.0),
            unit: ev.unit.clone().unwrap_or(StepUnit::Epoch),
        });
        let others: Vec<(u32, u64)> = s
            .procs
            .iter()
            .filter(|o| o.gpu == p.gpu && o.pid != p.pid)
            .filter_map(|o| Some((o.pid, o.nvml_used?)))
            .collect();
        OomContext {
            leak,
            others_held: (!others.is_empty()).then(|| others.iter().map(|o| o.1).sum()),
            largest_other: others.iter().copied().max_by_key(|o| o.1),
            card_total: g.map(|g| g.total).filter(|t| *t > 0),
            free_multiple: self.cfg.fragmentation.oom_free_multiple,
            min_free_share: self.cfg.fragmentation.min_free_share,
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
            let f = fragmentation::oom(p.pid, p.gpu, ev, &c.runtime, count, ctx);
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

/// The ceiling for allocated bytes: the allocator limit, or what the process holds plus
/// what the card still has free, whichever is lower.
fn allocator_ceiling(c: &CompanionView, free: Option<u64>, total: u64) -> Option<Ceiling> {
    let card = match (c.reserved, free) {
        (Some(r), Some(f)) => Some(r.saturating_add(f)),
        _ => (total > 0).then_some(total),
    };
    match (c.limit, card) {
        (Some(l), Some(cd)) if l <= cd => Some(Ceiling {
            bytes: l,
            source: CeilingSource::AllocatorLimit,
        }),
        (_, Some(cd)) => Some(Ceiling {
            bytes: cd,
            source: CeilingSource::CardNotHeld,
        }),
        (Some(l), None) => Some(Ceiling {
            bytes: l,
            source: CeilingSource::AllocatorLimit,
        }),
        (None, None) => None,
    }
}

/// R: the largest of the allocator counter, the block map's largest live block and the
/// last OOM's request, with where it came from.
fn largest_request(c: &CompanionView) -> Option<(u64, RequestSource)> {
    let cands = [
        (c.largest_alloc, RequestSource::AllocCounter),
        (
            c.frag.and_then(|f| f.largest_block),
            RequestSource::BlockMap,
        ),
        (
            c.ooms.last().and_then(|e| e.requested),
            RequestSource::LastOom,
        ),
    ];
    cands
        .into_iter()
        .filter_map(|(v, s)| Some((v?, s)))
        .filter(|(v, _)| *v > 0)
        .fold(None, |best: Option<(u64, RequestSource)>, cur| match best {
            Some(b) if b.0 >= cur.0 => Some(b),
            _ => Some(cur),
        })
}
