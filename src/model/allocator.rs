//! What companions report about their allocators, per process and device:
//! latest counters and the allocator's own peaks, free-block histogram and
//! fragmentation index, epoch floors/peaks, OOM events, link counters.
//! Built only from `CompanionFrame`s, so live and replayed runs look the same.

use std::collections::{BTreeMap, VecDeque};

use crate::model::caps;
use crate::model::frame::CompanionFrame;
use crate::model::mapping::{Mapping, logical_index, same_gpu};
use crate::model::named::EventKind;
use crate::model::sample::GpuInfo;
use crate::model::series::{Peak, Series};
use crate::model::time::Ts;
use crate::wire::{
    AllocBatch, DeviceInfo, EpochRecord, Frag, FrameworkEvent, Hello, HistBucket, History,
    LinkStats, Marker, Message, Sample,
};

/// Per device: every epoch since the start, as the companion keeps them.
pub const MAX_EPOCHS: usize = 10_000;
pub const MAX_EVENTS: usize = 1_000;
pub const MAX_MARKERS: usize = 1_000;
pub const MAX_COMPANIONS: usize = 256;
/// A companion that said nothing for this long is forgotten even without a
/// disconnect (a recording that was cut off); live ones move to `ended` at once
/// when their connection ends.
pub const SILENT_EXPIRE_MS: i64 = 30 * 60_000;
/// Ended companions kept for the post-mortem (their process's last allocator state and
/// OOM), at most this many and this many worst-case bytes: the oldest ended goes first.
/// Live companions keep their own budget (`caps::MAX_TOTAL_BYTES`), so a run of short
/// processes never pushes a live one out.
pub const MAX_ENDED: usize = 64;
pub const MAX_ENDED_BYTES: usize = caps::MAX_TOTAL_BYTES / 4;

/// A sample and a block map this close are one moment (the companion sends the two of an
/// epoch end with the same time, a peak reading right after the sample that triggered it).
const MOMENT_MS: i64 = 1_000;

/// Fragmentation index `F = 1 − L/T`: 0 when nothing is free, `None` when the
/// largest free block is unknown (never guessed).
pub fn frag_index(free_total: u64, largest_free: Option<u64>) -> Option<f64> {
    let l = largest_free?;
    if free_total == 0 {
        return Some(0.0);
    }
    Some((1.0 - l.min(free_total) as f64 / free_total as f64).clamp(0.0, 1.0))
}

/// How long after an OOM its own numbers stay the newest complete reading.
pub const OOM_MOMENT_HOLD_MS: i64 = 5_000;

/// The latest free-block picture of one device.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FragState {
    pub t: Ts,
    pub free_total: Option<u64>,
    pub largest_free: Option<u64>,
    pub n_free_blocks: Option<u64>,
    pub n_segments: Option<u64>,
    pub largest_block: Option<u64>,
    /// `None` with `na` set when the framework cannot list free blocks.
    pub hist: Option<Vec<HistBucket>>,
    /// The largest free and live blocks, exact, largest first: the holes a
    /// large request can be served from, which F alone does not tell.
    pub free_top: Vec<u64>,
    pub live_top: Vec<u64>,
    /// Large sizes allocated anew in several snapshots: `(size, times)`.
    pub requests: Vec<(u64, u64)>,
    pub source: Option<String>,
    /// Allocated and reserved at the block map's moment (the sample of the same phase
    /// point, within a second), so one line can show numbers of one moment.
    pub moment: Option<(u64, u64)>,
    /// When that sample was taken: a nearer one replaces it (a reading at a new high is
    /// sent just before the sample that triggered it, with the same time).
    pub moment_t: Option<Ts>,
    /// Why free blocks are unavailable, in the companion's words.
    pub na: Option<String>,
    pub cost_us: Option<u64>,
}

impl FragState {
    fn from_msg(t: Ts, f: &Frag) -> Self {
        let hist = f.hist.as_deref().map(caps::normalize_hist);
        FragState {
            t,
            free_total: f.free_total,
            largest_free: f.largest_free,
            n_free_blocks: f.n_free_blocks,
            n_segments: f.n_segments,
            largest_block: f.largest_block,
            hist,
            free_top: f.free_top.clone(),
            live_top: f.live_top.clone(),
            requests: f.requests.clone(),
            source: f.source.clone(),
            moment: None,
            moment_t: None,
            na: f
                .na
                .get("free_blocks")
                .or_else(|| f.na.values().next())
                .cloned(),
            cost_us: f.cost_us,
        }
    }

    /// F = 1 − L/T.
    pub fn index(&self) -> Option<f64> {
        frag_index(self.free_total?, self.largest_free)
    }

    /// Bytes free in the pool yet out of reach of one request larger than L.
    pub fn stranded(&self) -> Option<u64> {
        Some(self.free_total?.saturating_sub(self.largest_free?))
    }
}

/// One device of one process, as its allocator sees it.
#[derive(Debug, Clone)]
pub struct DevAlloc {
    pub dev: u32,
    pub info: Option<DeviceInfo>,
    pub last: Option<Sample>,
    pub last_t: Ts,
    pub allocated: Series,
    pub reserved: Series,
    /// Fragmentation index over time (0..1).
    pub frag_f: Series,
    pub stranded: Series,
    /// Highest allocated/reserved gpumon saw (the allocator's own lifetime
    /// peaks are in `last`; these survive a user's `reset_peak_memory_stats`).
    pub seen_allocated: Peak,
    pub seen_reserved: Peak,
    pub frag: Option<FragState>,
    pub epochs: VecDeque<EpochRecord>,
    pub events: VecDeque<FrameworkEvent>,
    /// Largest single allocation seen (R in the fragmentation-risk rule).
    pub largest_alloc: Option<u64>,
    /// Data came from a native interposer (`alloc` batches), not a framework.
    pub interposer: bool,
}

impl DevAlloc {
    fn new(dev: u32) -> Self {
        DevAlloc {
            dev,
            info: None,
            last: None,
            last_t: 0,
            allocated: Series::default(),
            reserved: Series::default(),
            frag_f: Series::default(),
            stranded: Series::default(),
            seen_allocated: Peak::default(),
            seen_reserved: Peak::default(),
            frag: None,
            epochs: VecDeque::new(),
            events: VecDeque::new(),
            largest_alloc: None,
            interposer: false,
        }
    }

    pub fn allocated_now(&self) -> Option<u64> {
        self.last.as_ref().and_then(|s| s.allocated)
    }

    pub fn reserved_now(&self) -> Option<u64> {
        self.last.as_ref().and_then(|s| s.reserved)
    }

    /// Held by the allocator but not handed out: reserved − allocated.
    pub fn cached_now(&self) -> Option<u64> {
        Some(self.reserved_now()?.saturating_sub(self.allocated_now()?))
    }

    pub fn limit(&self) -> Option<u64> {
        self.last.as_ref().and_then(|s| s.limit)
    }

    /// The allocator's own lifetime peak, else the highest gpumon saw.
    pub fn peak_allocated(&self) -> Option<u64> {
        let own = self.last.as_ref().and_then(|s| s.peak_allocated);
        let seen = (self.seen_allocated.at != 0).then_some(self.seen_allocated.value);
        own.max(seen)
    }

    pub fn peak_reserved(&self) -> Option<u64> {
        let own = self.last.as_ref().and_then(|s| s.peak_reserved);
        let seen = (self.seen_reserved.at != 0).then_some(self.seen_reserved.value);
        own.max(seen)
    }

    pub fn ooms(&self) -> impl Iterator<Item = &FrameworkEvent> {
        self.events.iter().filter(|e| e.kind == EventKind::Oom)
    }

    /// Whether `f` is a reading of the last OOM's moment.
    pub fn at_oom(&self, f: &FragState) -> bool {
        self.ooms().last().and_then(|e| e.t) == Some(f.t)
    }

    /// The newest complete reading of the free blocks: the last OOM event's free total and
    /// largest hole when it is newer than the last block map, or that map came within
    /// `OOM_MOMENT_HOLD_MS` after it (the failing moment, not the epoch end before it nor
    /// the unwound step after it), else the last block map.
    pub fn frag_now(&self) -> Option<std::borrow::Cow<'_, FragState>> {
        let f = self.frag.as_ref();
        // Readings in the seconds after the OOM show the failed step unwound (its
        // tensors freed), not what failed; a run that survives its OOM reads anew after.
        let oom = self.ooms().last().filter(|e| {
            e.free_total.is_some()
                && e.t
                    .is_some_and(|t| f.is_none_or(|f| t > f.t || f.t - t < OOM_MOMENT_HOLD_MS))
        });
        match (oom, f) {
            (Some(e), f) => {
                let mut st = f.cloned().unwrap_or_default();
                st.t = e.t.unwrap_or(st.t);
                st.free_total = e.free_total;
                st.largest_free = e.largest_free;
                // The block list and the moment's sample are of the older reading.
                st.hist = None;
                st.moment = None;
                st.moment_t = None;
                st.na = None;
                Some(std::borrow::Cow::Owned(st))
            }
            (None, Some(f)) => Some(std::borrow::Cow::Borrowed(f)),
            (None, None) => None,
        }
    }

    fn sample(&mut self, t: Ts, s: &Sample) {
        if t < self.last_t {
            // History replayed after live data (a reconnect): already seen.
            return;
        }
        self.last_t = t;
        self.allocated.push(t, s.allocated.map(|v| v as f64));
        self.reserved.push(t, s.reserved.map(|v| v as f64));
        if let Some(a) = s.allocated {
            self.seen_allocated.observe(t, a);
        }
        if let Some(r) = s.reserved {
            self.seen_reserved.observe(t, r);
        }
        // JAX-style stats carry L with every sample; T = reserved − allocated then.
        if let (Some(l), Some(r), Some(a)) = (s.largest_free, s.reserved, s.allocated)
            && self
                .frag
                .as_ref()
                .is_none_or(|f| f.t <= t && f.hist.is_none())
        {
            let f = Frag {
                free_total: Some(r.saturating_sub(a)),
                largest_free: Some(l),
                source: Some("stats".into()),
                na: self
                    .frag
                    .as_ref()
                    .and_then(|f| f.na.clone())
                    .map_or_else(BTreeMap::new, |n| {
                        BTreeMap::from([("free_blocks".to_string(), n)])
                    }),
                ..Frag::default()
            };
            self.frag_update(t, &f);
        }
        self.largest_alloc = self.largest_alloc.max(s.largest_alloc);
        self.last = Some(s.clone());
        // The sample of a block map's phase point may come just after it.
        if let Some(f) = self.frag.as_mut()
            && (t - f.t).abs() <= MOMENT_MS
            && f.moment_t.is_none_or(|m| (t - f.t).abs() < (m - f.t).abs())
            && let (Some(a), Some(r)) = (s.allocated, s.reserved)
        {
            f.moment = Some((a, r));
            f.moment_t = Some(t);
        }
    }

    /// Allocated and reserved of the last sample when it was taken within a second of `t`.
    fn moment_at(&self, t: Ts) -> Option<(u64, u64)> {
        let s = self.last.as_ref()?;
        ((self.last_t - t).abs() <= MOMENT_MS).then_some((s.allocated?, s.reserved?))
    }

    fn frag_update(&mut self, t: Ts, f: &Frag) {
        let mut st = FragState::from_msg(t, f);
        if let (Some(a), Some(r)) = (f.allocated, f.reserved) {
            // the block map's own numbers: the moment itself
            st.moment = Some((a, r));
            st.moment_t = Some(t);
        } else if let Some(m) = self.moment_at(t) {
            st.moment = Some(m);
            st.moment_t = Some(self.last_t);
        }
        self.frag_f.push(t, st.index());
        self.stranded.push(t, st.stranded().map(|v| v as f64));
        self.largest_alloc = self.largest_alloc.max(st.largest_block);
        self.frag = Some(st);
    }

    fn epoch(&mut self, e: &EpochRecord) {
        if self
            .epochs
            .iter()
            .rev()
            .take(4)
            .any(|x| x.epoch == e.epoch && x.t == e.t)
        {
            return;
        }
        push_bounded(&mut self.epochs, e.clone(), MAX_EPOCHS);
    }

    fn event(&mut self, e: &FrameworkEvent) {
        if self.events.iter().rev().take(8).any(|x| x == e) {
            return;
        }
        if e.kind == EventKind::Oom {
            self.largest_alloc = self.largest_alloc.max(e.requested);
        }
        push_bounded(&mut self.events, e.clone(), MAX_EVENTS);
    }

    fn alloc(&mut self, t: Ts, a: &AllocBatch) {
        self.interposer = true;
        let s = Sample {
            t: a.t,
            dev: a.dev,
            allocated: a.live_bytes,
            reserved: a.pool_reserved,
            peak_allocated: a.peak_bytes,
            ..Sample::default()
        };
        self.sample(t, &s);
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(v);
}

/// One process with a companion.
#[derive(Debug, Clone)]
pub struct ProcAlloc {
    pub pid: u32,
    pub hello: Option<Hello>,
    pub first_seen: Ts,
    pub last_seen: Ts,
    pub devices: BTreeMap<u32, DevAlloc>,
    pub markers: VecDeque<Marker>,
    /// What gpumon refused or dropped on this connection.
    pub link: LinkStats,
    /// Messages the companion dropped for this monitor (it reports its count).
    pub companion_dropped: u64,
    /// Reason of a clean shutdown announced by the companion.
    pub bye: Option<String>,
    /// When the connection ended (the process exited or stopped its companion).
    pub ended: Option<Ts>,
    /// Messages of types this gpumon does not know yet (newer companion).
    pub errors: Vec<String>,
    /// Messages or items refused by the memory caps (`model::caps`), and the last reason.
    pub refused: u64,
    pub refused_why: Option<&'static str>,
    /// Worst-case bytes this companion holds (`caps::companion_worst_bytes`).
    worst: usize,
}

impl ProcAlloc {
    fn new(pid: u32, t: Ts) -> Self {
        ProcAlloc {
            pid,
            hello: None,
            first_seen: t,
            last_seen: t,
            devices: BTreeMap::new(),
            markers: VecDeque::new(),
            link: LinkStats::default(),
            companion_dropped: 0,
            bye: None,
            ended: None,
            errors: Vec::new(),
            refused: 0,
            refused_why: None,
            worst: 0,
        }
    }

    fn refuse(&mut self, why: &'static str) {
        self.refused += 1;
        self.refused_why = Some(why);
    }

    /// The device's state, or `None` (counted) when the number is out of range
    /// or this companion already has its cap of devices.
    fn dev(&mut self, dev: u32) -> Option<&mut DevAlloc> {
        if let Some(why) = caps::bad_dev(dev) {
            self.refuse(why);
            return None;
        }
        if !self.devices.contains_key(&dev) && self.devices.len() >= caps::MAX_DEVICES_PER_COMPANION
        {
            self.refuse("too many devices");
            return None;
        }
        let info = self
            .hello
            .as_ref()
            .and_then(|h| h.devices.iter().find(|d| d.dev == dev).cloned());
        let d = self
            .devices
            .entry(dev)
            .or_insert_with(|| DevAlloc::new(dev));
        if d.info.is_none() {
            d.info = info;
        }
        Some(d)
    }

    /// Keeps the epochs and events of all devices together within the
    /// companion's own caps (it keeps `MAX_EPOCHS` in all, not per device), so
    /// more devices never multiply them: the oldest go first.
    fn trim(&mut self) {
        type Queue<T> = fn(&mut DevAlloc) -> &mut VecDeque<T>;
        fn oldest<T>(
            devs: &mut BTreeMap<u32, DevAlloc>,
            q: Queue<T>,
            t: fn(&T) -> Option<Ts>,
            cap: usize,
        ) {
            let mut total: usize = devs.values_mut().map(|d| q(d).len()).sum();
            while total > cap {
                let mut best: Option<(Option<Ts>, u32)> = None;
                for (k, d) in devs.iter_mut() {
                    if let Some(ft) = q(d).front().map(t)
                        && best.is_none_or(|(bt, _)| ft < bt)
                    {
                        best = Some((ft, *k));
                    }
                }
                let Some((_, k)) = best else { break };
                if let Some(d) = devs.get_mut(&k) {
                    q(d).pop_front();
                }
                total -= 1;
            }
        }
        oldest(&mut self.devices, |d| &mut d.epochs, |e| e.t, MAX_EPOCHS);
        oldest(&mut self.devices, |d| &mut d.events, |e| e.t, MAX_EVENTS);
        let epochs = self.devices.values().map(|d| d.epochs.len()).sum();
        let events = self.devices.values().map(|d| d.events.len()).sum();
        self.worst =
            caps::companion_worst_bytes(self.devices.len(), epochs, events, self.markers.len());
    }

    fn hello(&mut self, h: &Hello) {
        let restarted = self
            .hello
            .as_ref()
            .is_some_and(|old| old.started.is_some() && old.started != h.started);
        if restarted {
            // Same pid, new companion (pid reuse or stop/start): start over.
            self.devices.clear();
            self.markers.clear();
        }
        for d in &h.devices {
            let info = Some(d.clone());
            if let Some(dev) = self.dev(d.dev) {
                dev.info = info;
            }
        }
        self.bye = None;
        self.hello = Some(h.clone());
    }

    fn history(&mut self, t: Ts, h: &History) {
        // Each item passes the same caps as the message it stands for.
        let long = "strings over the per-item budget";
        for s in &h.samples {
            if caps::sample_strings(s) > caps::MAX_ITEM_STRING_BYTES {
                self.refuse(long);
                continue;
            }
            let st = s.t.unwrap_or(t);
            if let Some(d) = self.dev(s.dev) {
                d.sample(st, s);
            }
            self.note_dropped(s);
        }
        for e in &h.epochs {
            if caps::epoch_strings(e) > caps::MAX_ITEM_STRING_BYTES {
                self.refuse(long);
            } else if let Some(d) = self.dev(e.dev) {
                d.epoch(e);
            }
        }
        for m in &h.markers {
            if caps::marker_strings(m) > caps::MAX_ITEM_STRING_BYTES {
                self.refuse(long);
            } else {
                self.marker(m);
            }
        }
        for e in &h.events {
            if caps::event_strings(e) > caps::MAX_ITEM_STRING_BYTES {
                self.refuse(long);
            } else {
                self.event(t, e);
            }
        }
        for f in &h.frag {
            if caps::frag_strings(f) > caps::MAX_ITEM_STRING_BYTES {
                self.refuse(long);
                continue;
            }
            let ft = f.t.unwrap_or(t);
            if let Some(d) = self.dev(f.dev)
                && d.frag.as_ref().is_none_or(|old| old.t <= ft)
            {
                d.frag_update(ft, f);
            }
        }
    }

    fn marker(&mut self, m: &Marker) {
        if self.markers.iter().rev().take(8).any(|x| x == m) {
            return;
        }
        push_bounded(&mut self.markers, m.clone(), MAX_MARKERS);
    }

    fn event(&mut self, t: Ts, e: &FrameworkEvent) {
        let mut e = e.clone();
        e.t = e.t.or(Some(t));
        if let Some(d) = self.dev(e.dev.unwrap_or(0)) {
            d.event(&e);
        }
    }

    fn note_dropped(&mut self, s: &Sample) {
        if let Some(d) = s.dropped {
            self.companion_dropped = self.companion_dropped.max(d);
        }
    }

    /// Epoch markers (the `epoch` messages of any device), oldest first, for chart ticks.
    pub fn epoch_times(&self) -> Vec<(Ts, u64)> {
        let mut v: Vec<(Ts, u64)> = self
            .devices
            .values()
            .flat_map(|d| d.epochs.iter().filter_map(|e| Some((e.t?, e.epoch))))
            .collect();
        v.sort_unstable();
        v.dedup_by_key(|x| x.1);
        v
    }
}

/// Allocator state of every process with a companion.
#[derive(Debug, Default, Clone)]
pub struct Companions {
    pub by_pid: BTreeMap<u32, ProcAlloc>,
    /// Sum of every companion's worst-case bytes (`caps`), kept under `caps::MAX_TOTAL_BYTES`.
    worst_total: usize,
    /// Companions dropped to keep that bound.
    pub evicted: u64,
    /// Companions whose connection ended, as they last were: what a gone process's
    /// detail view shows (bounded by `MAX_ENDED`, `MAX_ENDED_BYTES`; the model drops one
    /// when it forgets the process, `forget`).
    pub ended: BTreeMap<u32, ProcAlloc>,
    ended_total: usize,
}

impl Companions {
    pub fn apply(&mut self, frame: &CompanionFrame) {
        let t = frame.t;
        if let Message::Disconnected(_) = &frame.msg {
            // The live budget is freed; the last state moves to `ended` for the post-mortem.
            if let Some(mut p) = self.take(frame.pid) {
                p.ended = Some(t.max(p.last_seen));
                self.keep_ended(p);
            }
            return;
        }
        if !self.by_pid.contains_key(&frame.pid) {
            // The same pid again (a new process, or the companion restarted): a new story.
            self.forget(frame.pid);
        }
        let p = self
            .by_pid
            .entry(frame.pid)
            .or_insert_with(|| ProcAlloc::new(frame.pid, t));
        p.last_seen = p.last_seen.max(t);
        if let Some(why) = caps::refuse(&frame.msg) {
            p.refuse(why);
            self.bound();
            return;
        }
        let before = p.worst;
        match &frame.msg {
            Message::Hello(h) => p.hello(h),
            Message::Sample(s) => {
                if let Some(d) = p.dev(s.dev) {
                    d.sample(s.t.unwrap_or(t), s);
                }
                p.note_dropped(s);
            }
            Message::Frag(f) => {
                if let Some(d) = p.dev(f.dev) {
                    d.frag_update(f.t.unwrap_or(t), f);
                }
            }
            Message::Epoch(e) => {
                let mut e = e.clone();
                e.t = e.t.or(Some(t));
                if let Some(d) = p.dev(e.dev) {
                    d.epoch(&e);
                }
            }
            Message::Marker(m) => {
                let mut m = m.clone();
                m.t = m.t.or(Some(t));
                p.marker(&m);
            }
            Message::Event(e) => p.event(t, e),
            Message::History(h) => p.history(t, h),
            Message::Alloc(a) => {
                if let Some(d) = p.dev(a.dev) {
                    d.alloc(a.t.unwrap_or(t), a);
                }
            }
            Message::Bye(b) => p.bye = Some(b.reason.clone().unwrap_or_else(|| "bye".into())),
            Message::Error(e) => {
                if p.errors.len() < 16 {
                    p.errors.push(format!("{}: {}", e.code, e.text));
                }
            }
            Message::Link(l) => p.link = l.clone(),
            Message::Disconnected(_) => {}
        }
        p.trim();
        self.worst_total = self.worst_total - before + p.worst;
        self.bound();
    }

    pub fn expire(&mut self, now: Ts) {
        let n = self.by_pid.len();
        self.by_pid
            .retain(|_, p| now - p.last_seen <= SILENT_EXPIRE_MS);
        if self.by_pid.len() != n {
            self.worst_total = self.by_pid.values().map(|p| p.worst).sum();
            crate::model::trim::give_back();
        }
    }

    fn remove(&mut self, pid: u32) {
        if let Some(p) = self.take(pid) {
            trim_after(&p);
        }
    }

    /// Out of the live map and its budget.
    fn take(&mut self, pid: u32) -> Option<ProcAlloc> {
        let p = self.by_pid.remove(&pid)?;
        self.worst_total -= p.worst;
        Some(p)
    }

    fn keep_ended(&mut self, p: ProcAlloc) {
        if let Some(old) = self.ended.remove(&p.pid) {
            self.ended_total -= old.worst;
        }
        self.ended_total += p.worst;
        self.ended.insert(p.pid, p);
        while self.ended.len() > MAX_ENDED || self.ended_total > MAX_ENDED_BYTES {
            let oldest = self
                .ended
                .iter()
                .min_by_key(|(_, p)| p.ended)
                .map(|(pid, _)| *pid);
            match oldest {
                Some(pid) => self.forget(pid),
                None => break,
            }
        }
    }

    /// Drop what an ended companion left (the model forgot its process).
    pub fn forget(&mut self, pid: u32) {
        if let Some(p) = self.ended.remove(&pid) {
            self.ended_total -= p.worst;
            trim_after(&p);
        }
    }

    /// Worst-case bytes the ended companions hold, for the memory-bound tests.
    pub fn ended_bytes(&self) -> usize {
        self.ended_total
    }

    /// A process's allocator state: its live companion, else the last state of one that
    /// ended (a gone process's post-mortem).
    pub fn latest(&self, pid: u32) -> Option<&ProcAlloc> {
        self.by_pid.get(&pid).or_else(|| self.ended.get(&pid))
    }

    /// `for_gpu_in` over `latest`: the live companion, else the ended one.
    pub(super) fn latest_for_gpu_in(
        &self,
        pid: u32,
        gpu: &GpuInfo,
        all: &[GpuInfo],
    ) -> Option<&DevAlloc> {
        match self.by_pid.get(&pid) {
            Some(p) => dev_for_gpu(p, gpu, all),
            None => dev_for_gpu(self.ended.get(&pid)?, gpu, all),
        }
    }

    /// Worst-case bytes all companions hold (`caps`), for the memory-bound tests.
    pub fn worst_bytes(&self) -> usize {
        self.worst_total
    }

    fn bound(&mut self) {
        while self.by_pid.len() > MAX_COMPANIONS {
            let oldest = self
                .by_pid
                .iter()
                .min_by_key(|(_, p)| p.last_seen)
                .map(|(pid, _)| *pid);
            match oldest {
                Some(pid) => self.remove(pid),
                None => break,
            };
        }
        // The memory ceiling: the largest footprint goes first, which is the
        // flooding companion rather than the quiet ones beside it.
        while self.worst_total > caps::MAX_TOTAL_BYTES {
            let largest = self
                .by_pid
                .iter()
                .max_by_key(|(_, p)| p.worst)
                .map(|(pid, _)| *pid);
            match largest {
                Some(pid) => {
                    self.evicted += 1;
                    self.remove(pid);
                }
                None => break,
            };
        }
    }

    pub fn get(&self, pid: u32) -> Option<&ProcAlloc> {
        self.by_pid.get(&pid)
    }

    /// A process's allocator data for a physical GPU, matched by UUID or PCI bus id.
    #[cfg(test)]
    pub(super) fn for_gpu(&self, pid: u32, gpu: &GpuInfo) -> Option<&DevAlloc> {
        named_dev(self.get(pid)?, gpu)
    }

    /// Like `for_gpu`, falling back to the process's `CUDA_VISIBLE_DEVICES`
    /// (from its hello) when the companion could not name its devices.
    pub(super) fn for_gpu_in(&self, pid: u32, gpu: &GpuInfo, all: &[GpuInfo]) -> Option<&DevAlloc> {
        dev_for_gpu(self.get(pid)?, gpu, all)
    }
}

/// Hand the freed heap back to the system, so a companion that grew gpumon does not
/// leave its RSS behind when it goes.
fn trim_after(p: &ProcAlloc) {
    if p.worst >= caps::DEVICE_BYTES {
        crate::model::trim::give_back();
    }
}

fn named_dev<'a>(p: &'a ProcAlloc, gpu: &GpuInfo) -> Option<&'a DevAlloc> {
    p.devices
        .values()
        .find(|d| d.info.as_ref().is_some_and(|i| same_gpu(i, gpu)))
}

fn dev_for_gpu<'a>(p: &'a ProcAlloc, gpu: &GpuInfo, all: &[GpuInfo]) -> Option<&'a DevAlloc> {
    if let Some(d) = named_dev(p, gpu) {
        return Some(d);
    }
    let h = p.hello.as_ref()?;
    match logical_index(
        all,
        gpu.index,
        true,
        h.cuda_visible_devices.as_deref(),
        h.cuda_device_order.as_deref(),
    ) {
        // Only a device the companion could not name falls back to the variable: a
        // device it named is on the card it named (a device initialised after the
        // hello has no name yet).
        Mapping::Logical { index, .. } => p.devices.get(&index).filter(|d| {
            d.info
                .as_ref()
                .is_none_or(|i| i.uuid.is_none() && i.pci_bus_id.is_none())
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cf(t: Ts, pid: u32, msg: Message) -> CompanionFrame {
        CompanionFrame { t, pid, msg }
    }

    fn gpu(index: u32, uuid: &str, pci: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: "H200".into(),
            uuid: uuid.into(),
            pci_bus_id: pci.into(),
            memory_total: 100,
            mig_uuids: vec![],
        }
    }

    fn hello(devices: Vec<DeviceInfo>, cvd: Option<&str>) -> Message {
        Message::Hello(Hello {
            role: "companion".into(),
            framework: Some("torch".into()),
            framework_version: Some("2.11".into()),
            started: Some(1),
            devices,
            cuda_visible_devices: cvd.map(str::to_string),
            ..Hello::default()
        })
    }

    fn sample(dev: u32, alloc: u64, reserved: u64) -> Message {
        Message::Sample(Sample {
            dev,
            allocated: Some(alloc),
            reserved: Some(reserved),
            peak_allocated: Some(alloc + 5),
            ..Sample::default()
        })
    }

    /// A block map read at a new high is sent just before the sample that triggered it,
    /// with the same time: that sample, not the one before, is its moment.
    #[test]
    fn a_block_map_takes_the_sample_of_its_own_moment() {
        let mut d = DevAlloc::new(0);
        let sample = |a: u64| Sample {
            allocated: Some(a),
            reserved: Some(2000),
            ..Sample::default()
        };
        d.sample(1_000, &sample(700));
        d.frag_update(1_250, &Frag::default());
        assert_eq!(d.frag.as_ref().and_then(|f| f.moment), Some((700, 2000)));
        d.sample(1_250, &sample(1400));
        assert_eq!(d.frag.as_ref().and_then(|f| f.moment), Some((1400, 2000)));
        d.sample(1_500, &sample(800));
        assert_eq!(
            d.frag.as_ref().and_then(|f| f.moment),
            Some((1400, 2000)),
            "a later sample is not nearer"
        );
    }

    #[test]
    fn fragmentation_index_definition() {
        assert_eq!(frag_index(0, Some(0)), Some(0.0));
        assert_eq!(frag_index(100, None), None);
        assert_eq!(frag_index(100, Some(100)), Some(0.0));
        let f = frag_index(500 * 18, Some(18)).expect("known");
        assert!((f - (1.0 - 1.0 / 500.0)).abs() < 1e-12);
        // A largest block above the total (inconsistent peer) is clamped, not negative.
        assert_eq!(frag_index(10, Some(20)), Some(0.0));
        let st = FragState {
            free_total: Some(100),
            largest_free: Some(30),
            ..FragState::default()
        };
        assert_eq!(st.stranded(), Some(70));
    }

    #[test]
    fn samples_frag_epochs_and_disconnect() {
        let mut c = Companions::default();
        let dev = DeviceInfo {
            dev: 0,
            uuid: Some("GPU-ABC".into()),
            ..DeviceInfo::default()
        };
        c.apply(&cf(1_000, 7, hello(vec![dev], None)));
        c.apply(&cf(2_000, 7, sample(0, 10, 50)));
        c.apply(&cf(
            2_100,
            7,
            Message::Frag(Frag {
                dev: 0,
                free_total: Some(40),
                largest_free: Some(10),
                hist: Some(vec![(4, 1, 30), (3, 1, 10)]),
                ..Frag::default()
            }),
        ));
        c.apply(&cf(
            3_000,
            7,
            Message::Epoch(EpochRecord {
                epoch: 0,
                dev: 0,
                floor: Some(9),
                peak: Some(20),
                ..EpochRecord::default()
            }),
        ));
        let d = c
            .for_gpu(7, &gpu(3, "gpu-abc", ""))
            .expect("matched by uuid");
        assert_eq!(d.cached_now(), Some(40));
        assert_eq!(d.peak_allocated(), Some(15));
        let fr = d.frag.as_ref().expect("frag");
        assert_eq!(fr.index(), Some(0.75));
        assert_eq!(
            fr.hist.as_ref().map(|h| h[0].0),
            Some(3),
            "sorted by bucket"
        );
        assert_eq!(d.epochs.len(), 1);
        assert_eq!(c.get(7).map(|p| p.epoch_times()), Some(vec![(3_000, 0)]));
        assert!(c.for_gpu(7, &gpu(0, "GPU-DEF", "")).is_none());
        c.apply(&cf(
            4_000,
            7,
            Message::Disconnected(crate::wire::Disconnected {
                reason: "closed".into(),
            }),
        ));
        assert!(c.get(7).is_none(), "a dead process is no longer live");
        assert_eq!(c.worst_bytes(), 0, "and its live budget is free");
        let gone = c
            .latest(7)
            .expect("its last state stays for the post-mortem");
        assert_eq!(gone.ended, Some(4_000));
        let d = c
            .latest_for_gpu_in(7, &gpu(3, "gpu-abc", ""), &[])
            .expect("its device too");
        assert_eq!(d.cached_now(), Some(40));
        // The same pid again is a new process: the old story goes.
        c.apply(&cf(5_000, 7, sample(0, 1, 2)));
        assert!(c.ended.is_empty());
        assert_eq!(c.latest(7).map(|p| p.ended), Some(None));
    }

    #[test]
    fn ended_companions_are_bounded_oldest_first() {
        let mut c = Companions::default();
        for pid in 1..=(MAX_ENDED as u32 + 5) {
            let t = Ts::from(pid) * 1_000;
            c.apply(&cf(t, pid, sample(0, 10, 50)));
            c.apply(&cf(
                t,
                pid,
                Message::Disconnected(crate::wire::Disconnected::default()),
            ));
        }
        assert_eq!(c.ended.len(), MAX_ENDED);
        assert!(c.latest(1).is_none(), "the oldest ended went first");
        assert!(c.latest(MAX_ENDED as u32 + 5).is_some());
        assert!(c.ended_bytes() <= MAX_ENDED_BYTES);
        c.forget(MAX_ENDED as u32 + 5);
        assert_eq!(c.ended.len(), MAX_ENDED - 1);
    }

    #[test]
    fn stats_only_frameworks_get_f_from_largest_free() {
        let mut c = Companions::default();
        c.apply(&cf(
            1_000,
            3,
            Message::Sample(Sample {
                dev: 0,
                allocated: Some(700),
                reserved: Some(2_000),
                largest_free: Some(130),
                ..Sample::default()
            }),
        ));
        let d = &c.get(3).expect("created lazily").devices[&0];
        let f = d.frag.as_ref().expect("derived frag");
        assert_eq!(f.free_total, Some(1_300));
        assert_eq!(f.index(), Some(0.9));
        assert_eq!(f.source.as_deref(), Some("stats"));
    }

    #[test]
    fn unknown_free_blocks_stay_unknown_with_reason() {
        let mut c = Companions::default();
        c.apply(&cf(
            1,
            4,
            Message::Frag(Frag {
                dev: 0,
                na: BTreeMap::from([(
                    "free_blocks".to_string(),
                    "TensorFlow exposes no free-block list".to_string(),
                )]),
                ..Frag::default()
            }),
        ));
        let f = c
            .get(4)
            .and_then(|p| p.devices[&0].frag.clone())
            .expect("frag");
        assert_eq!(f.index(), None);
        assert_eq!(f.stranded(), None);
        assert_eq!(
            f.na.as_deref(),
            Some("TensorFlow exposes no free-block list")
        );
    }

    #[test]
    fn history_fills_a_late_monitor_and_is_not_duplicated() {
        let mut c = Companions::default();
        c.apply(&cf(100_000, 5, hello(vec![], None)));
        let hist = History {
            epochs: (0..3)
                .map(|e| EpochRecord {
                    t: Some(10_000 * (e as i64 + 1)),
                    epoch: e,
                    dev: 0,
                    floor: Some(100 + e),
                    ..EpochRecord::default()
                })
                .collect(),
            samples: vec![Sample {
                t: Some(50_000),
                dev: 0,
                allocated: Some(1),
                ..Sample::default()
            }],
            events: vec![FrameworkEvent {
                t: Some(60_000),
                kind: "oom".into(),
                dev: Some(0),
                requested: Some(64),
                ..FrameworkEvent::default()
            }],
            done: true,
            ..History::default()
        };
        c.apply(&cf(100_001, 5, Message::History(hist.clone())));
        c.apply(&cf(100_002, 5, Message::History(hist)));
        let d = &c.get(5).expect("pid").devices[&0];
        assert_eq!(d.epochs.len(), 3);
        assert_eq!(d.events.len(), 1);
        assert_eq!(
            d.largest_alloc,
            Some(64),
            "an OOM request is an allocation size"
        );
        assert_eq!(d.ooms().count(), 1);
        assert_eq!(d.allocated.last_time(), Some(50_000));
    }

    #[test]
    fn restarted_companion_starts_over() {
        let mut c = Companions::default();
        c.apply(&cf(1, 5, hello(vec![], None)));
        c.apply(&cf(2, 5, sample(0, 1, 1)));
        let Message::Hello(mut h) = hello(vec![], None) else {
            unreachable!("built as a hello")
        };
        h.started = Some(99);
        c.apply(&cf(3, 5, Message::Hello(h)));
        assert!(c.get(5).expect("pid").devices.is_empty());
    }

    #[test]
    fn gpu_matching_by_pci_and_by_visible_devices() {
        let gpus = vec![
            gpu(0, "GPU-A", "00000000:17:00.0"),
            gpu(1, "GPU-B", "00000000:65:00.0"),
        ];
        let mut c = Companions::default();
        let pci_dev = DeviceInfo {
            dev: 0,
            pci_bus_id: Some("0000:65:00.0".into()),
            ..DeviceInfo::default()
        };
        c.apply(&cf(1, 1, hello(vec![pci_dev], None)));
        c.apply(&cf(2, 1, sample(0, 1, 1)));
        assert_eq!(c.for_gpu(1, &gpus[1]).map(|d| d.dev), Some(0));
        assert!(c.for_gpu_in(1, &gpus[0], &gpus).is_none());

        // No identity at all: CUDA_VISIBLE_DEVICES=1 makes cuda:0 the second card.
        c.apply(&cf(1, 2, hello(vec![], Some("1"))));
        c.apply(&cf(2, 2, sample(0, 1, 1)));
        assert!(c.for_gpu(2, &gpus[1]).is_none());
        assert_eq!(c.for_gpu_in(2, &gpus[1], &gpus).map(|d| d.dev), Some(0));
        assert!(c.for_gpu_in(2, &gpus[0], &gpus).is_none());
    }

    #[test]
    fn expiry_and_bounds() {
        let mut c = Companions::default();
        for pid in 0..(MAX_COMPANIONS as u32 + 10) {
            c.apply(&cf(i64::from(pid), pid + 1, sample(0, 1, 1)));
        }
        assert_eq!(c.by_pid.len(), MAX_COMPANIONS);
        assert!(c.get(1).is_none(), "least recently heard goes first");
        c.expire(SILENT_EXPIRE_MS + 300);
        assert!(c.by_pid.len() < MAX_COMPANIONS);
        c.expire(10 * SILENT_EXPIRE_MS);
        assert!(c.by_pid.is_empty());
    }
}
