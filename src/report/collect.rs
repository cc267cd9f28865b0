//! What the page needs from a replay, gathered frame by frame after the pipeline has
//! applied each one: memory series (min/max downsampled), epoch floors and peaks, the
//! allocator at the moments that matter, process lives. Companion devices are placed on
//! physical GPUs by the model's own mapping (`State::alloc_on`), remembered while
//! the companion is connected: the model forgets a companion when it disconnects.

use std::collections::{BTreeMap, HashMap};

use crate::model::frame::{Frame, Header, Level};
use crate::model::named::EventKind;
use crate::model::sample::GpuInfo;
use crate::model::state::State;
use crate::model::time::Ts;
use crate::report::alerts::AlertLine;
use crate::report::minmax::MinMax;
use crate::wire::{Frag, Hello, HistBucket, Message};

/// OOM moments kept per process and device (a run that OOMs in a loop repeats itself).
const MAX_OOMS: usize = 20;
/// Epoch points kept per process and device; the chart has fewer pixels than this.
const MAX_EPOCHS: usize = 20_000;
/// Source warnings and errors quoted on the page.
const MAX_NOTES: usize = 20;

// What a report keeps at most, so that a recording someone hands you costs bounded memory
// and time (each series is at most `minmax::CAPACITY` buckets), with the model's caps where
// it has one. What goes past a cap is counted and the page says so (`Run::left_out`).
/// GPUs (the model's cap).
pub const MAX_GPUS: usize = crate::model::state::MAX_GPUS;
/// Process rows, one per (pid, GPU), in the order they are first seen.
pub const MAX_PROCS: usize = 256;
/// Companion devices (pid, device), and companions.
pub const MAX_DEVS: usize = 256;
pub const MAX_COMPANIONS: usize = 256;
/// Command lines remembered, and the bytes kept of each.
pub const MAX_NAMES: usize = 1024;
pub const MAX_NAME_BYTES: usize = 4096;
/// Epoch points of all devices together.
pub const MAX_EPOCH_POINTS: usize = 100_000;
/// Frames are read from an hour before the header's start to a year after it: one tick at
/// `t = i64::MAX` made the time axis span 292 million years.
pub const EARLIEST: Ts = 3_600_000;
pub const LONGEST: Ts = 366 * 86_400_000;

/// One run, ready to be written as a page.
#[derive(Debug, Clone)]
pub struct Run {
    pub file: String,
    pub header: Header,
    pub start: Ts,
    pub end: Ts,
    pub frames: u64,
    pub gpus: Vec<GpuRun>,
    /// Per process and GPU (NVML index; `None` when the companion's device was never placed).
    pub procs: Vec<ProcRun>,
    pub companions: BTreeMap<u32, CompanionRun>,
    pub alerts: Vec<AlertLine>,
    pub notes: Vec<(Ts, String)>,
    /// What the caps above left out, counted.
    pub dropped: Dropped,
    /// Each process's program, rank and job as the model last knew them.
    pub who: BTreeMap<u32, crate::model::job::Identity>,
    /// The distributed jobs among the run's processes.
    pub jobs: Vec<crate::model::job::Job>,
    /// How each process ended, or was ending when the run did, as the live view says it
    /// (`State::ending`): the one account every page of the report reads.
    pub ends: BTreeMap<u32, crate::model::exit::Exit>,
}

/// Readings left out of a report by its caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Frames whose time is outside [start − 1 h, start + 366 days].
    pub out_of_time: u64,
    /// GPU readings of GPUs past the first `MAX_GPUS`.
    pub gpu_readings: u64,
    /// NVML process readings of rows past the first `MAX_PROCS`.
    pub proc_readings: u64,
    /// Companion messages of devices or companions past their caps.
    pub companion_msgs: u64,
    /// Command lines not kept (past `MAX_NAMES`), and command lines cut to `MAX_NAME_BYTES`.
    pub names: u64,
    pub names_cut: u64,
    /// Epoch points past `MAX_EPOCH_POINTS` (or a device's own cap).
    pub epochs: u64,
}

impl Dropped {
    /// One sentence per kind of reading left out.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![];
        let mut say = |n: u64, what: String| {
            if n > 0 {
                out.push(format!("{n} {what}"));
            }
        };
        say(
            self.out_of_time,
            "frames left out: their time is more than an hour before the recording's start or more than 366 days after it".into(),
        );
        say(
            self.gpu_readings,
            format!("GPU readings left out: GPUs past the first {MAX_GPUS}"),
        );
        say(
            self.proc_readings,
            format!(
                "process readings left out: processes past the first {MAX_PROCS} (pid and GPU)"
            ),
        );
        say(
            self.companion_msgs,
            format!(
                "companion messages left out: past the first {MAX_COMPANIONS} companions or {MAX_DEVS} devices"
            ),
        );
        say(
            self.names,
            format!("command lines left out: past the first {MAX_NAMES} processes"),
        );
        say(
            self.names_cut,
            format!("command lines cut to {MAX_NAME_BYTES} bytes"),
        );
        say(
            self.epochs,
            format!("epoch points left out: past {MAX_EPOCH_POINTS} in all, or 20,000 per device"),
        );
        out
    }
}

#[derive(Debug, Clone)]
pub struct GpuRun {
    pub info: GpuInfo,
    pub total: u64,
    pub used: MinMax,
    pub peak: Option<(Ts, u64)>,
}

#[derive(Debug, Clone)]
pub struct ProcRun {
    pub pid: u32,
    pub gpu: Option<u32>,
    pub name: String,
    /// First and last time NVML listed it on this GPU.
    pub nvml_seen: Option<(Ts, Ts)>,
    pub nvml: MinMax,
    pub nvml_peak: Option<(Ts, u64)>,
    /// `cuda:N` as the model mapped this GPU for the process.
    pub mapping: Option<String>,
    pub dev: Option<DevRun>,
}

/// One companion device: what its allocator said over the run.
#[derive(Debug, Clone)]
pub struct DevRun {
    pub dev: u32,
    pub allocated: MinMax,
    pub reserved: MinMax,
    pub epochs: Vec<EpochPoint>,
    pub limit: Option<u64>,
    pub last_t: Ts,
    pub worst_frag: Option<Moment>,
    pub ooms: Vec<Moment>,
    last_frag: Option<(Ts, Frag)>,
    reserved_now: Option<u64>,
    allocated_now: Option<u64>,
    sample_t: Option<Ts>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochPoint {
    pub t: Ts,
    pub epoch: u64,
    pub floor: Option<u64>,
    pub peak: Option<u64>,
}

/// The allocator at one moment: its last free-block picture and what happened then. Each
/// reading keeps its own time (the block map's, the sample's), which may be older than `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    pub t: Ts,
    pub frag: Option<(Ts, Frag)>,
    /// When `allocated` and `reserved` were sampled.
    pub sample_t: Option<Ts>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub limit: Option<u64>,
    pub oom: Option<OomEvent>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OomEvent {
    pub requested: Option<u64>,
    pub device_free: Option<u64>,
    pub free_total: Option<u64>,
    pub largest_free: Option<u64>,
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct CompanionRun {
    pub hello: Option<Hello>,
    pub first: Ts,
    pub last: Ts,
    pub bye: Option<String>,
    pub disconnected: Option<Ts>,
}

impl Moment {
    pub fn hist(&self) -> Option<&[HistBucket]> {
        self.frag.as_ref().and_then(|(_, f)| f.hist.as_deref())
    }
}

pub struct Collector {
    run: Run,
    width: i64,
    gpus: BTreeMap<u32, GpuRun>,
    procs: BTreeMap<(u32, u32), ProcRun>,
    devs: BTreeMap<(u32, u32), DevRun>,
    dev_gpu: HashMap<(u32, u32), u32>,
    names: HashMap<u32, String>,
    epoch_points: usize,
    who: BTreeMap<u32, crate::model::job::Identity>,
}

impl Collector {
    pub fn new(file: String, h: &Header) -> Collector {
        let width = (h.interval_ms as i64).max(100);
        let gpus = h
            .gpus
            .iter()
            .take(MAX_GPUS)
            .map(|g| {
                let run = GpuRun {
                    info: g.clone(),
                    total: g.memory_total,
                    used: MinMax::new(h.started, width),
                    peak: None,
                };
                (g.index, run)
            })
            .collect();
        Collector {
            run: Run {
                file,
                header: h.clone(),
                start: h.started,
                end: h.started,
                frames: 0,
                gpus: vec![],
                procs: vec![],
                companions: BTreeMap::new(),
                alerts: vec![],
                notes: vec![],
                dropped: Dropped::default(),
                who: BTreeMap::new(),
                jobs: vec![],
                ends: BTreeMap::new(),
            },
            width,
            gpus,
            procs: BTreeMap::new(),
            devs: BTreeMap::new(),
            dev_gpu: HashMap::new(),
            names: HashMap::new(),
            epoch_points: 0,
            who: BTreeMap::new(),
        }
    }

    /// Whether a frame at `t` belongs to the run (`EARLIEST`, `LONGEST`); one that does
    /// not is counted, and neither applied nor shown.
    pub fn admits_time(&mut self, t: Ts) -> bool {
        let start = self.run.header.started;
        let ok = t >= start.saturating_sub(EARLIEST) && t <= start.saturating_add(LONGEST);
        if !ok {
            self.run.dropped.out_of_time += 1;
        }
        ok
    }

    /// Take in one frame the pipeline has just applied to `state`.
    pub fn observe(&mut self, f: &Frame, state: &State) {
        self.run.frames += 1;
        self.run.end = self.run.end.max(f.time());
        match f {
            Frame::Tick(tick) => {
                self.tick(tick, state);
                self.note_ends(state);
            }
            Frame::Procs { procs, .. } => {
                for p in procs {
                    let cmd = p.cmdline.as_ref().filter(|c| !c.trim().is_empty());
                    let Some(n) = cmd.or(p.name.as_ref()) else {
                        continue;
                    };
                    if self.names.len() >= MAX_NAMES && !self.names.contains_key(&p.pid) {
                        self.run.dropped.names += 1;
                        continue;
                    }
                    let n = if n.len() > MAX_NAME_BYTES {
                        self.run.dropped.names_cut += 1;
                        let mut end = MAX_NAME_BYTES;
                        while !n.is_char_boundary(end) {
                            end -= 1;
                        }
                        n[..end].to_string()
                    } else {
                        n.clone()
                    };
                    self.names.insert(p.pid, n);
                    self.note_who(p.pid, state);
                }
            }
            Frame::Companion(c) => {
                if matches!(c.msg, Message::Hello(_)) {
                    self.note_who(c.pid, state);
                }
                self.companion(c.t, c.pid, &c.msg, state)
            }
            Frame::Status { t, level, text, .. }
                if *level != Level::Info && self.run.notes.len() < MAX_NOTES =>
            {
                self.run.notes.push((*t, text.clone()));
            }
            _ => {}
        }
    }

    fn tick(&mut self, tick: &crate::model::sample::Tick, state: &State) {
        let t = tick.t;
        for g in &tick.gpus {
            let start = self.run.start;
            let width = self.width;
            if self.gpus.len() >= MAX_GPUS && !self.gpus.contains_key(&g.index) {
                self.run.dropped.gpu_readings += 1;
                continue;
            }
            let run = self.gpus.entry(g.index).or_insert_with(|| GpuRun {
                info: GpuInfo {
                    index: g.index,
                    name: format!("GPU {}", g.index),
                    uuid: String::new(),
                    pci_bus_id: String::new(),
                    memory_total: 0,
                    mig_uuids: vec![],
                },
                total: 0,
                used: MinMax::new(start, width),
                peak: None,
            });
            if let Some(m) = g.mem {
                run.total = run.total.max(m.total);
                run.used.push(t, m.used as f64);
                if run.peak.is_none_or(|(_, p)| m.used > p) {
                    run.peak = Some((t, m.used));
                }
            }
            for p in &g.procs {
                if self.procs.len() >= MAX_PROCS && !self.procs.contains_key(&(p.pid, g.index)) {
                    self.run.dropped.proc_readings += 1;
                    continue;
                }
                let pr = self
                    .procs
                    .entry((p.pid, g.index))
                    .or_insert_with(|| ProcRun::new(p.pid, Some(g.index), start, width));
                pr.nvml_seen = Some(pr.nvml_seen.map_or((t, t), |(a, _)| (a, t)));
                if let Some(u) = p.used {
                    pr.nvml.push(t, u as f64);
                    if pr.nvml_peak.is_none_or(|(_, v)| u > v) {
                        pr.nvml_peak = Some((t, u));
                    }
                }
                if pr.mapping.is_none()
                    && let Some(pg) = state.procs.get(&p.pid).and_then(|s| s.gpus.get(&g.index))
                    && !matches!(pg.mapping, crate::model::mapping::Mapping::Unknown)
                {
                    pr.mapping = Some(pg.mapping.label());
                }
            }
        }
    }

    fn companion(&mut self, t: Ts, pid: u32, msg: &Message, state: &State) {
        if self.run.companions.len() >= MAX_COMPANIONS && !self.run.companions.contains_key(&pid) {
            self.run.dropped.companion_msgs += 1;
            return;
        }
        let c = self
            .run
            .companions
            .entry(pid)
            .or_insert_with(|| CompanionRun {
                first: t,
                ..CompanionRun::default()
            });
        c.last = t;
        match msg {
            Message::Hello(h) => c.hello = Some(h.clone()),
            Message::Bye(b) => c.bye = Some(b.reason.clone().unwrap_or_else(|| "bye".into())),
            Message::Disconnected(_) => c.disconnected = Some(t),
            _ => {}
        }
        let Some(dev) = msg.dev() else { return };
        if self.devs.len() >= MAX_DEVS && !self.devs.contains_key(&(pid, dev)) {
            self.run.dropped.companion_msgs += 1;
            return;
        }
        if !self.dev_gpu.contains_key(&(pid, dev))
            && let Some(g) = place(state, pid, dev)
        {
            self.dev_gpu.insert((pid, dev), g);
        }
        let (start, width) = (self.run.start, self.width);
        let d = self
            .devs
            .entry((pid, dev))
            .or_insert_with(|| DevRun::new(dev, start, width));
        d.last_t = t;
        match msg {
            Message::Sample(s) => {
                if s.allocated.is_some() || s.reserved.is_some() {
                    d.sample_t = Some(t);
                }
                if let Some(a) = s.allocated {
                    d.allocated.push(t, a as f64);
                    d.allocated_now = Some(a);
                }
                if let Some(r) = s.reserved {
                    d.reserved.push(t, r as f64);
                    d.reserved_now = Some(r);
                }
                if s.limit.is_some() {
                    d.limit = s.limit;
                }
            }
            Message::Epoch(e)
                if d.epochs.len() < MAX_EPOCHS && self.epoch_points < MAX_EPOCH_POINTS =>
            {
                self.epoch_points += 1;
                d.epochs.push(EpochPoint {
                    t,
                    epoch: e.epoch,
                    floor: e.floor,
                    peak: e.peak,
                })
            }
            Message::Epoch(_) => self.run.dropped.epochs += 1,
            Message::Frag(f) => {
                let stranded = |f: &Frag| {
                    f.free_total
                        .zip(f.largest_free)
                        .map(|(t, l)| t.saturating_sub(l))
                };
                let worse = match (&d.worst_frag, stranded(f)) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(m), Some(s)) => {
                        m.frag.as_ref().and_then(|(_, f)| stranded(f)).unwrap_or(0) < s
                    }
                };
                d.last_frag = Some((t, f.clone()));
                if worse {
                    d.worst_frag = Some(d.moment(t, None));
                }
            }
            Message::Event(e) if e.kind == EventKind::Oom && d.ooms.len() < MAX_OOMS => {
                let oom = OomEvent {
                    requested: e.requested,
                    device_free: e.device_free,
                    free_total: e.free_total,
                    largest_free: e.largest_free,
                    limit: e.limit,
                };
                let m = d.moment(t, Some(oom));
                d.ooms.push(m);
            }
            _ => {}
        }
    }

    /// The run, with every companion device attached to its process's GPU.
    pub fn finish(mut self, alerts: Vec<AlertLine>) -> Run {
        for ((pid, dev), d) in std::mem::take(&mut self.devs) {
            let listed: Vec<u32> = self
                .procs
                .keys()
                .filter(|(p, _)| *p == pid)
                .map(|(_, g)| *g)
                .collect();
            // A device never placed by the model: the one GPU NVML listed the process on.
            let gpu = self
                .dev_gpu
                .get(&(pid, dev))
                .copied()
                .or_else(|| (listed.len() == 1).then(|| listed[0]));
            match gpu {
                Some(g) => {
                    let (start, width) = (self.run.start, self.width);
                    let pr = self
                        .procs
                        .entry((pid, g))
                        .or_insert_with(|| ProcRun::new(pid, Some(g), start, width));
                    pr.dev = Some(d);
                }
                None => {
                    let mut pr = ProcRun::new(pid, None, self.run.start, self.width);
                    pr.dev = Some(d);
                    self.run.procs.push(pr);
                }
            }
        }
        let mut procs: Vec<ProcRun> = std::mem::take(&mut self.procs).into_values().collect();
        procs.append(&mut self.run.procs);
        for p in &mut procs {
            let hello_cmd = self
                .run
                .companions
                .get(&p.pid)
                .and_then(|c| c.hello.as_ref())
                .and_then(|h| h.cmdline.clone());
            p.name = self
                .names
                .get(&p.pid)
                .cloned()
                .or(hello_cmd)
                .unwrap_or_default();
        }
        procs.sort_by_key(|p| (p.gpu.unwrap_or(u32::MAX), p.pid));
        self.run.procs = procs;
        self.run.jobs = crate::model::job::group(self.who.iter().map(|(p, w)| (*p, w)));
        self.run.who = self.who;
        self.run.gpus = self.gpus.into_values().collect();
        self.run.alerts = alerts;
        self.run
    }
}

impl Collector {
    /// Each process's end as the model tells it now: marked, provisional (an OOM while
    /// the exit's grace runs), or taken back when NVML lists it again.
    fn note_ends(&mut self, state: &State) {
        for (pid, p) in &state.procs {
            match state.ending(p) {
                Some(e) if self.run.ends.len() < MAX_NAMES || self.run.ends.contains_key(pid) => {
                    self.run.ends.insert(*pid, e);
                }
                Some(_) => {}
                None if p.unlisted == 0 => {
                    self.run.ends.remove(pid);
                }
                None => {}
            }
        }
    }

    /// What the model knows of a process's program, rank and job, kept past its exit.
    fn note_who(&mut self, pid: u32, state: &State) {
        if self.who.len() >= MAX_NAMES && !self.who.contains_key(&pid) {
            return;
        }
        let who = match state.procs.get(&pid) {
            Some(p) => p.who.clone(),
            None => {
                let hello = state.companions.get(pid).and_then(|c| c.hello.as_ref());
                let bare = crate::model::sample::ProcInfo {
                    pid,
                    ..Default::default()
                };
                crate::model::job::Identity::of(&bare, hello)
            }
        };
        self.who.insert(pid, who);
    }
}

/// The physical GPU (NVML index) of a companion's device, as the model maps it.
fn place(state: &State, pid: u32, dev: u32) -> Option<u32> {
    state
        .live_allocs_of(pid)
        .find_map(|(gpu, d)| (d.dev == dev).then_some(gpu))
}

impl ProcRun {
    fn new(pid: u32, gpu: Option<u32>, start: Ts, width: i64) -> ProcRun {
        ProcRun {
            pid,
            gpu,
            name: String::new(),
            nvml_seen: None,
            nvml: MinMax::new(start, width),
            nvml_peak: None,
            mapping: None,
            dev: None,
        }
    }

    /// When the process was last seen on this GPU (NVML, else its companion).
    pub fn last_seen(&self) -> Option<Ts> {
        let n = self.nvml_seen.map(|(_, b)| b);
        let c = self.dev.as_ref().map(|d| d.last_t);
        n.max(c)
    }

    pub fn first_seen(&self) -> Option<Ts> {
        let n = self.nvml_seen.map(|(a, _)| a);
        let c = self
            .dev
            .as_ref()
            .and_then(|d| d.allocated.span().or(d.reserved.span()).map(|s| s.0));
        match (n, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl DevRun {
    fn new(dev: u32, start: Ts, width: i64) -> DevRun {
        DevRun {
            dev,
            allocated: MinMax::new(start, width),
            reserved: MinMax::new(start, width),
            epochs: vec![],
            limit: None,
            last_t: start,
            worst_frag: None,
            ooms: vec![],
            last_frag: None,
            reserved_now: None,
            allocated_now: None,
            sample_t: None,
        }
    }

    fn moment(&self, t: Ts, oom: Option<OomEvent>) -> Moment {
        Moment {
            t,
            frag: self.last_frag.clone(),
            sample_t: self.sample_t,
            allocated: self.allocated_now,
            reserved: self.reserved_now,
            limit: oom.as_ref().and_then(|o| o.limit).or(self.limit),
            oom,
        }
    }
}
