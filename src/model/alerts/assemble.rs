//! Each rule's input for one process, put together from the snapshot and from what the
//! engine knows besides it: which alerts are active (hysteresis, an OOM's cause) and the
//! signals it followed across evaluations. The engine calls these and keeps only the
//! lifecycle; the rules stay pure functions of their inputs.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::model::time::Ts;

use super::cache_fit::{self, FitInput, Recurrence};
use super::config::{AlertConfig, GrowthConfig};
use super::fragmentation::{self, FragInput, RequestSource};
use super::grab_all::{self, GrabInput};
use super::growth::{self, Ceiling, GrowthContext, WindowSource};
use super::headroom::{self, HeadroomInput};
use super::inputs::{CompanionView, Envelope, EpochPoint, GpuView, ProcView, Runtime, Snapshot};
use super::memory::Memory;
use super::oom::{LeakNote, OomContext};
use super::retry_risk::{self, RetryInput};
use super::staircase::{self, StairInput};
use super::{Alert, AlertKey, AlertKind, Basis, CeilingSource, Finding, StepUnit, TrendSeries};

/// One process on one GPU, as the rules see it.
pub struct Subject<'a> {
    pub snap: &'a Snapshot,
    pub proc: &'a ProcView,
    /// Its card, when the snapshot lists it.
    pub gpu: Option<&'a GpuView>,
    pub cfg: &'a AlertConfig,
    pub memory: &'a Memory,
    /// The alerts active on this process and GPU.
    pub active: Vec<&'a Alert>,
}

impl<'a> Subject<'a> {
    fn active(&self, kind: AlertKind) -> Option<&'a Alert> {
        let key = self.key(kind);
        self.active.iter().copied().find(|a| a.key() == key)
    }

    fn key(&self, kind: AlertKind) -> AlertKey {
        AlertKey {
            kind,
            pid: Some(self.proc.pid),
            gpu: self.proc.gpu,
        }
    }

    fn total(&self) -> u64 {
        self.gpu.map_or(0, |g| g.total)
    }

    fn free(&self) -> Option<u64> {
        self.gpu.and_then(|g| g.free)
    }

    /// The growth rule on the best series the process has: the companion's epochs, then
    /// its fixed windows (no markers), then NVML at epoch markers (a companion that reads
    /// no framework), then NVML's fixed windows.
    pub fn growth(&self) -> Option<Finding> {
        let (p, cfg, total) = (self.proc, &self.cfg.growth, self.total());
        let mut ctx = GrowthContext {
            pid: p.pid,
            gpu: p.gpu,
            capacity: total,
            ceiling: None,
            current_epoch: None,
            last_epoch: None,
            growth_active: self.active(AlertKind::Growth).is_some(),
            cache_active: self.active(AlertKind::CacheGrowth).is_some(),
            exact: false,
            envelope: Envelope::default(),
        };
        if let Some(c) = &p.companion {
            ctx.capacity = c
                .limit
                .map_or(total, |l| if total > 0 { l.min(total) } else { l });
            ctx.ceiling = allocator_ceiling(c, self.free(), total);
            ctx.envelope = c.envelope;
            ctx.current_epoch = c.current_epoch.or(c.epochs.last().map(|e| e.epoch));
            ctx.last_epoch = c.last_epoch;
            if !c.epochs.is_empty() {
                // Floors an allocator counted after gc (or the interposer's live bytes).
                ctx.exact = true;
                // A leak in equal steps that the trend tests read as flat, once its
                // ceiling is a step or two away.
                let stairs = || {
                    staircase::check(&StairInput {
                        pid: p.pid,
                        gpu: p.gpu,
                        epochs: &c.epochs,
                        request: c
                            .frag
                            .as_ref()
                            .and_then(|f| f.requests.iter().map(|r| r.0).max()),
                        ceiling: ctx.ceiling.clone(),
                    })
                };
                return epoch_growth(&c.epochs, c.baseline_from, &ctx, cfg).or_else(stairs);
            }
            if !c.allocated_windows.is_empty() && p.nvml_epochs.is_empty() {
                let source = if c.interposer {
                    WindowSource::Exact
                } else {
                    WindowSource::Allocated
                };
                return growth::window_growth(&c.allocated_windows, source, &ctx, cfg);
            }
        }
        // NVML's numbers: what the process holds grows into what the card has left.
        ctx.ceiling = match (p.nvml_used, self.free()) {
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
            ctx.current_epoch = p.nvml_epochs.last().map(|e| e.epoch);
            return growth::nvml_epoch_growth(&p.nvml_epochs, &ctx, cfg);
        }
        growth::window_growth(&p.nvml_windows, WindowSource::Nvml, &ctx, cfg)
    }

    /// Rules that must persist before they are raised, with their persistence period.
    pub fn conditions(&self) -> Vec<(Finding, i64)> {
        let (p, cfg) = (self.proc, self.cfg);
        let mut out = Vec::new();
        if let Some(c) = &p.companion
            && let Some(fi) = frag_input(p, c, self.free())
        {
            let epoch = c.current_epoch;
            // One fragmentation-risk alert per process: the most severe of the readings'
            // rule, the cache-fit rule (already judged over two epochs of block maps, so no
            // persistence of its own) and the retries (an event).
            let risks = [
                fragmentation::risk(p.pid, p.gpu, &fi, &c.runtime, epoch)
                    .map(|f| (f, cfg.fragmentation.persist_ms)),
                self.cache_fit(c, &fi).map(|f| (f, 0)),
                self.retry_risk(c, &fi).map(|f| (f, 0)),
            ];
            if let Some(best) = risks
                .into_iter()
                .flatten()
                .reduce(|a, b| if b.0.severity > a.0.severity { b } else { a })
            {
                out.push(best);
            }
            let hi = HeadroomInput {
                free_total: fi.free_total,
                largest_free: fi.largest_free,
                device_avail: fi.device_avail,
                request: fi.request,
            };
            if let Some(f) = headroom::check(p.pid, p.gpu, &hi, epoch) {
                out.push((f, cfg.headroom.persist_ms));
            }
        }
        if let Some(f) = self.grab_all() {
            out.push((f, cfg.grab_all.persist_ms));
        }
        out
    }

    /// Grab-all on the lowest NVML reading over the persistence period (when the series
    /// covers it, so a moment's peak is not a grab). An active alert is not re-judged on
    /// less than it was raised on: while NVML does not list the process this tick (it is
    /// ending, or a tick was missed) or after its companion said goodbye while it still
    /// holds the share, it stands as it is until the process is listed again or has
    /// exited (and the engine ends it then, saying so), rather than easing to NVML's
    /// "cannot tell" guess about an allocator it has seen (corpus2's PID 600).
    fn grab_all(&self) -> Option<Finding> {
        let (p, cfg) = (self.proc, &self.cfg.grab_all);
        let c = p.companion.as_ref();
        let active = self.active(AlertKind::GrabAll);
        let Some(now) = p.nvml_used else {
            return active.map(standing);
        };
        let held = p.nvml_used_min_recent.unwrap_or(now);
        if let Some(a) = active
            && c.is_none()
            && a.evidence.basis == Basis::Allocator
            && self.total() > 0
            && held as f64 >= cfg.held_frac * self.total() as f64
        {
            return Some(standing(a));
        }
        let mut input = GrabInput {
            held,
            total: self.total(),
            allocator_used: c.and_then(|c| c.allocated),
            card_free: self.free(),
            policy: None,
            settings: Vec::new(),
        };
        // The words' inputs are copied only for a finding (every process, every evaluation).
        if !grab_all::fires(&input, cfg) {
            return None;
        }
        input.policy = c.and_then(|c| c.policy.clone());
        input.settings = c.map(|c| c.settings.clone()).unwrap_or_default();
        let unnamed = Runtime::default();
        let rt = c.map_or(&unnamed, |c| &c.runtime);
        grab_all::check(p.pid, p.gpu, &input, rt, cfg)
    }

    /// The cache-fit risk: the process's recurring large request against the holes of the
    /// block maps of the last two epochs and the room its limit leaves.
    fn cache_fit(&self, c: &CompanionView, fi: &FragInput) -> Option<Finding> {
        let p = self.proc;
        let reserved = c.reserved?;
        let latest = c.frag.as_ref()?;
        let (request, times, recurrence) =
            if latest.free_top.is_empty() && latest.live_top.is_empty() {
                let (r, n) = self.memory.alternating_block(p.pid, p.gpu)?;
                (r, n, Recurrence::LargestBlock)
            } else {
                let seen = latest.requests.iter().max_by_key(|(s, _)| *s).copied();
                // A larger request that is never alive when a map is read shows only as
                // its freed hole; it is the one that meets the limit first.
                match (
                    seen,
                    cache_fit::recurring_hole(self.memory.recent_free_tops(p.pid, p.gpu)),
                ) {
                    (Some((r, n)), Some((h, _))) if r >= h => (r, n, Recurrence::Companion),
                    (_, Some((h, n))) => (h, n, Recurrence::FreedHole),
                    (Some((r, n)), None) => (r, n, Recurrence::Companion),
                    (None, None) => return None,
                }
            };
        // Over the span: the most holes any reading had, the most copies a step held at
        // once, the widest margin: a reading taken mid-step (the request's own hole in
        // use) cannot raise it alone.
        let mut fit: Option<(u64, u64, Option<u64>, bool)> = None;
        for f in self.memory.readings(p.pid, p.gpu) {
            let Some((h, n, m, exact)) = cache_fit::read_fit(request, f) else {
                continue;
            };
            fit = Some(match fit {
                None => (h, n, m, exact),
                Some((h0, n0, m0, e0)) => (h0.max(h), n0.max(n), m0.max(m), e0 && exact),
            });
        }
        let (holes, need, margin, exact) = fit?;
        let input = FitInput {
            request,
            times,
            recurrence,
            room: fi.device_avail,
            limit: c.limit,
            reserved,
            free_total: fi.free_total,
            largest_free: fi.largest_free,
            holes,
            need,
            margin,
            exact,
        };
        cache_fit::check(
            p.pid,
            p.gpu,
            &input,
            &c.runtime,
            &self.cfg.fragmentation,
            c.current_epoch,
        )
    }

    /// The retry-based risk where the reading alone shows none; `None` when the framework
    /// counts no retries (or fewer than two epochs were seen) or reserved is unknown.
    fn retry_risk(&self, c: &CompanionView, fi: &FragInput) -> Option<Finding> {
        let p = self.proc;
        let input = RetryInput {
            frag: *fi,
            retries: self.memory.recent_retries(p.pid, p.gpu)?,
            hole_at_peak: self.memory.smallest_hole(p.pid, p.gpu),
            reserved: c.reserved?,
            active: self.active(AlertKind::FragmentationRisk).is_some(),
        };
        retry_risk::check(
            p.pid,
            p.gpu,
            &input,
            &c.runtime,
            &self.cfg.fragmentation,
            c.current_epoch,
        )
    }

    /// What an OOM alert needs besides the event: an active (or just found) leak on the
    /// process, and who else holds the card.
    pub fn oom_context(&self, growth: Option<&Finding>) -> OomContext {
        let p = self.proc;
        let leak = match (self.active(AlertKind::Growth), growth) {
            (Some(a), _) => Some((a.raised_epoch, &a.evidence, a.message.as_str())),
            (None, Some(f)) if f.key == self.key(AlertKind::Growth) => {
                Some((f.epoch, &f.evidence, f.message.as_str()))
            }
            _ => None,
        }
        .map(|(since_epoch, ev, message)| LeakNote {
            since_epoch,
            rate: ev.slope.unwrap_or(0.0),
            unit: ev.unit.clone().unwrap_or(StepUnit::Epoch),
            // The growth rule names a growing working set in its message; its evidence
            // then shows the peak series.
            working_set: ev.series == Some(TrendSeries::Peak)
                || message.contains("the working set"),
        });
        let others: Vec<(u32, u64)> = self
            .snap
            .procs
            .iter()
            .filter(|o| o.gpu == p.gpu && o.pid != p.pid)
            .filter_map(|o| Some((o.pid, o.nvml_used?)))
            .collect();
        let risk = self
            .active(AlertKind::FragmentationRisk)
            .map(|a| a.raised_epoch);
        OomContext {
            leak,
            risk,
            others_held: (!others.is_empty()).then(|| others.iter().map(|o| o.1).sum()),
            largest_other: others.iter().copied().max_by_key(|o| o.1),
            card_total: self.gpu.map(|g| g.total).filter(|t| *t > 0),
            free_multiple: self.cfg.fragmentation.oom_free_multiple,
            min_free_share: self.cfg.fragmentation.min_free_share,
        }
    }
}

/// The last `growth::epoch_growth` of one process on one GPU, and what it was computed from.
struct Slot {
    points: Vec<EpochPoint>,
    baseline_from: Option<Ts>,
    ctx: GrowthContext,
    cfg: GrowthConfig,
    finding: Option<Finding>,
}

/// Slots kept at most; past it they start afresh (a bound on memory, not a working set).
const SLOTS: usize = 256;

thread_local! {
    static EPOCH_GROWTH: RefCell<HashMap<(u32, u32), Slot>> = RefCell::new(HashMap::new());
}

/// `growth::epoch_growth`, remembered per process with every input: a leak's finding is
/// worded anew when its epochs or its context (ceiling, epoch in progress, hysteresis)
/// change, not every second in between. A context that changes every second (a ceiling of
/// reserved plus the card's free bytes) costs a comparison and a copy in place.
fn epoch_growth(
    points: &[EpochPoint],
    baseline_from: Option<Ts>,
    ctx: &GrowthContext,
    cfg: &GrowthConfig,
) -> Option<Finding> {
    let key = (ctx.pid, ctx.gpu);
    let same = |s: &Slot| {
        s.ctx == *ctx && s.baseline_from == baseline_from && s.points == points && s.cfg == *cfg
    };
    let hit = EPOCH_GROWTH.with(|m| {
        let m = m.borrow();
        let s = m.get(&key).filter(|s| same(s))?;
        Some(s.finding.clone())
    });
    if let Some(finding) = hit {
        return finding;
    }
    let finding = growth::epoch_growth(points, baseline_from, ctx, cfg);
    EPOCH_GROWTH.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= SLOTS && !m.contains_key(&key) {
            m.clear();
        }
        let s = m.entry(key).or_insert_with(|| Slot {
            points: Vec::new(),
            baseline_from,
            ctx: ctx.clone(),
            cfg: cfg.clone(),
            finding: None,
        });
        if s.points != points {
            s.points.clear();
            s.points.extend_from_slice(points);
        }
        if s.cfg != *cfg {
            s.cfg = cfg.clone();
        }
        s.baseline_from = baseline_from;
        s.ctx = ctx.clone();
        s.finding = finding.clone();
    });
    finding
}

/// An active alert as the finding that keeps it as it is.
fn standing(a: &Alert) -> Finding {
    Finding {
        key: a.key(),
        severity: a.severity,
        message: a.message.clone(),
        summary: a.summary.clone(),
        evidence: a.evidence.clone(),
        epoch: a.raised_epoch,
    }
}

/// T, L, D and R when all but L are known: T from the block map, or reserved − allocated.
fn frag_input(p: &ProcView, c: &CompanionView, free: Option<u64>) -> Option<FragInput> {
    let t = c
        .frag
        .as_ref()
        .map(|f| f.free_total)
        .or_else(|| Some(c.reserved?.saturating_sub(c.allocated?)))?;
    let (request, request_source) = largest_request(c)?;
    Some(FragInput {
        free_total: t,
        largest_free: c.frag.as_ref().and_then(|f| f.largest_free),
        device_avail: p.device_avail(free)?,
        request,
        request_source,
    })
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
    // A companion that reports recurring requests names the requests to come; the largest
    // block ever seen may be a parameter that is never requested again.
    let recurring = c
        .frag
        .as_ref()
        .and_then(|f| f.requests.iter().map(|(s, _)| *s).max());
    let last_oom = c.ooms.last().and_then(|e| e.requested);
    if let Some(r) = recurring {
        return Some(match last_oom {
            Some(o) if o > r => (o, RequestSource::LastOom),
            _ => (r, RequestSource::Recurring),
        });
    }
    let cands = [
        (c.largest_alloc, RequestSource::AllocCounter),
        (
            c.frag.as_ref().and_then(|f| f.largest_block),
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

/// The divergent-rank rule over every job in the snapshot: its running ranks, each with
/// the epochs its companion reported (or NVML's usage at its epoch markers), its ceiling
/// and its epoch time.
pub fn divergent_ranks(snap: &Snapshot, cfg: &AlertConfig) -> Vec<Finding> {
    let mut jobs: std::collections::BTreeMap<&str, Vec<&ProcView>> = Default::default();
    for p in snap.procs.iter().filter(|p| !p.exited) {
        if let Some(j) = &p.job {
            jobs.entry(j.as_str()).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    for (job, procs) in jobs {
        let ranks = procs
            .iter()
            .map(|p| {
                let gpu = snap.gpus.iter().find(|g| g.index == p.gpu);
                let (free, total) = (gpu.and_then(|g| g.free), gpu.map_or(0, |g| g.total));
                let (epochs, ceiling) = match &p.companion {
                    Some(c) if !c.epochs.is_empty() => (
                        c.epochs.as_slice(),
                        allocator_ceiling(c, free, total).map(|c| (c.bytes, c.source)),
                    ),
                    _ => (
                        p.nvml_epochs.as_slice(),
                        p.nvml_used
                            .zip(free)
                            .map(|(u, f)| (u.saturating_add(f), CeilingSource::CardNotHeld)),
                    ),
                };
                let epoch_ms = match (epochs.first(), epochs.last()) {
                    (Some(a), Some(b)) if b.epoch > a.epoch => {
                        Some((b.t - a.t) as f64 / (b.epoch - a.epoch) as f64)
                    }
                    _ => None,
                };
                super::divergent_rank::RankInput {
                    pid: p.pid,
                    gpu: p.gpu,
                    rank: p.rank,
                    epochs,
                    ceiling,
                    epoch_ms,
                }
            })
            .filter(|r| !r.epochs.is_empty())
            .collect();
        let input = super::divergent_rank::JobInput { job, ranks };
        out.extend(super::divergent_rank::check(&input, &cfg.divergent_rank));
    }
    out
}
