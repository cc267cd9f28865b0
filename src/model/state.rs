//! The whole monitored world, built only from frames: live, replayed and
//! test data all go through `State::apply`, so every screen is reproducible.

use std::collections::{BTreeMap, VecDeque};

use crate::model::allocator::Companions;
use crate::model::exit::{EXIT_GRACE_MIN_MS, EXIT_GRACE_MS, EXIT_GRACE_TICKS, Exit, ExitCause};
use crate::model::frame::{Frame, Header, Level};
use crate::model::job::{Identity, Job};
use crate::model::mapping::{Mapping, logical_index};
use crate::model::named::StatusSource;
use crate::model::sample::{GpuInfo, GpuSample, ProcInfo, ProcKind, ProcSample, Tick};
use crate::model::series::{Peak, Series};
use crate::model::time::Ts;

/// A process that NVML stopped listing is exported (metrics, snapshots) this long after
/// its exit, so a finished run's series do not linger (and label cardinality stays bounded).
pub const PROCESS_GRACE_MS: i64 = 60_000;
/// How long an exited process stays listed live (`keep_exited` in the config file): long
/// enough to read its post-mortem after coming back to the terminal. A replay keeps it
/// for the rest of the recording.
pub const KEEP_EXITED_LIVE_MS: i64 = 10 * 60_000;
/// At most this many processes are tracked; the least recently seen goes first.
pub const MAX_PROCESSES: usize = 256;
/// GPUs the model tracks (NVML hosts have at most a few dozen).
pub const MAX_GPUS: usize = 256;
const MAX_NOTICES: usize = 64;

#[derive(Debug, Clone)]
pub struct GpuState {
    pub info: GpuInfo,
    pub last: Option<GpuSample>,
    pub used: Series,
    pub peak: Peak,
}

impl GpuState {
    fn new(info: GpuInfo) -> Self {
        GpuState {
            info,
            last: None,
            used: Series::default(),
            peak: Peak::default(),
        }
    }

    /// Why the last tick could not read this device (fell off the bus, NVML error).
    pub fn error(&self) -> Option<&str> {
        self.last.as_ref().and_then(|s| s.error.as_deref())
    }

    pub fn total(&self) -> u64 {
        self.last
            .as_ref()
            .and_then(|s| s.mem)
            .map_or(self.info.memory_total, |m| m.total)
    }

    pub fn used_now(&self) -> Option<u64> {
        self.last.as_ref().and_then(|s| s.mem).map(|m| m.used)
    }
}

/// One process on one GPU.
#[derive(Debug, Clone)]
pub struct ProcGpu {
    pub gpu: u32,
    pub kind: ProcKind,
    pub used: Series,
    pub last_used: Option<u64>,
    pub peak: Peak,
    pub last_seen: Ts,
    pub mapping: Mapping,
    /// Its share of this GPU's SMs in the last sample that said (percent).
    pub sm_util: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct ProcState {
    pub info: ProcInfo,
    pub first_seen: Ts,
    pub last_seen: Ts,
    pub gpus: BTreeMap<u32, ProcGpu>,
    /// Set once NVML stopped listing it and its companion (if any) went away: the process
    /// stays listed as it last was, for `State::keep_exited_ms`.
    pub exit: Option<Exit>,
    /// Readable ticks in a row that did not list it (0 while listed).
    pub unlisted: u32,
    /// Host CPU (percent of one core) and resident bytes, as last sampled.
    pub cpu: Option<f32>,
    pub rss: Option<u64>,
    /// Its program, rank and job, from `info` and its companion's hello.
    pub who: Identity,
}

impl ProcState {
    pub(crate) fn new(info: ProcInfo, t: Ts) -> ProcState {
        ProcState {
            who: Identity::of(&info, None),
            info,
            first_seen: t,
            last_seen: t,
            gpus: BTreeMap::new(),
            exit: None,
            unlisted: 0,
            cpu: None,
            rss: None,
        }
    }

    /// The end of its story: the exit time, else `now` (charts of a gone process end there).
    pub fn until(&self, now: Ts) -> Ts {
        self.exit.map_or(now, |e| e.at)
    }
}

/// A line for the status bar: what a source said (a `Status` frame) or an alert change.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub t: Ts,
    pub source: StatusSource,
    pub level: Level,
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct State {
    pub header: Option<Header>,
    pub gpus: Vec<GpuState>,
    pub procs: BTreeMap<u32, ProcState>,
    pub companions: Companions,
    pub notices: VecDeque<Notice>,
    /// Data time of the newest frame: the clock every view uses.
    pub now: Ts,
    pub ticks: u64,
    /// The `info` of every GPU, in `gpus` order: what the mapping, the UI and the exporter
    /// need as a slice, kept here so nobody rebuilds it per frame.
    infos: Vec<GpuInfo>,
    /// How long an exited process stays listed; `None`: for the rest of the run (bounded
    /// by `MAX_PROCESSES`). Processes in `pinned` stay regardless.
    pub keep_exited_ms: Option<i64>,
    /// Processes something still refers to (an alert in the panel), so Enter on it finds
    /// them: set by the pipeline after each alert evaluation.
    pub pinned: std::collections::BTreeSet<u32>,
    /// How many exits have been marked: the pipeline evaluates the alerts when it moves, so
    /// an exited process's alerts end at its exit, not a second later (or never, at the end
    /// of a recording).
    pub exits: u64,
}

impl Default for State {
    fn default() -> State {
        State {
            header: None,
            gpus: Vec::new(),
            procs: BTreeMap::new(),
            companions: Companions::default(),
            notices: VecDeque::new(),
            now: 0,
            ticks: 0,
            infos: Vec::new(),
            keep_exited_ms: Some(KEEP_EXITED_LIVE_MS),
            pinned: Default::default(),
            exits: 0,
        }
    }
}

impl State {
    pub fn apply(&mut self, frame: &Frame) {
        self.now = self.now.max(frame.time());
        match frame {
            Frame::Header(h) => self.apply_header(h),
            Frame::Tick(t) => self.apply_tick(t),
            Frame::Procs { procs, .. } => {
                for p in procs {
                    self.apply_proc_info(p);
                }
            }
            Frame::Companion(c) => {
                self.companions.apply(c);
                if matches!(c.msg, crate::wire::Message::Hello(_)) {
                    self.refresh_who(c.pid);
                }
            }
            Frame::Alert(a) => {
                use crate::model::alerts::ChangeKind;
                // The alert bar shows alerts; the message log keeps when they happened.
                let what = match a.change {
                    ChangeKind::Raised => "raised",
                    ChangeKind::Worsened => "worsened",
                    ChangeKind::Eased => "eased",
                    ChangeKind::Cleared => "cleared",
                };
                let text = format!("{what}: {}", a.alert.summary);
                let m = Notice {
                    t: a.at,
                    source: StatusSource::Alert,
                    level: Level::Info,
                    text,
                };
                self.push_notice(m);
            }
            Frame::Status {
                t,
                source,
                level,
                text,
            } => {
                self.push_notice(Notice {
                    t: *t,
                    source: source.clone(),
                    level: *level,
                    text: text.clone(),
                });
            }
        }
    }

    fn apply_header(&mut self, h: &Header) {
        // A header may list any number of GPUs (48,000 cost 425 MB and 2.1 s): the
        // model keeps the first `MAX_GPUS`, as it does for ticks.
        let mut at: std::collections::HashMap<u32, usize> = self
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| (g.info.index, i))
            .collect();
        for info in &h.gpus {
            match at.get(&info.index) {
                Some(&i) => self.gpus[i].info = info.clone(),
                None if self.gpus.len() >= MAX_GPUS => {}
                None => {
                    at.insert(info.index, self.gpus.len());
                    self.gpus.push(GpuState::new(info.clone()));
                }
            }
        }
        self.gpus.sort_by_key(|g| g.info.index);
        self.refresh_infos();
        self.header = Some(Header {
            v: h.v,
            format: h.format.clone(),
            host: h.host.clone(),
            driver_version: h.driver_version.clone(),
            nvml_version: h.nvml_version.clone(),
            cuda_version: h.cuda_version.clone(),
            started: h.started,
            interval_ms: h.interval_ms,
            gpus: h.gpus.iter().take(MAX_GPUS).cloned().collect(),
            gpumon_version: h.gpumon_version.clone(),
        });
    }

    fn refresh_infos(&mut self) {
        self.infos = self.gpus.iter().map(|g| g.info.clone()).collect();
    }

    /// Every GPU's static facts, in the same order as `gpus`.
    pub fn gpu_infos(&self) -> &[GpuInfo] {
        &self.infos
    }

    fn apply_tick(&mut self, tick: &Tick) {
        let t = tick.t;
        self.ticks += 1;
        let mut new_gpus = false;
        for s in &tick.gpus {
            let pos = match self.gpus.iter().position(|g| g.info.index == s.index) {
                Some(p) => p,
                // A recording may list any number of GPUs; no host has more than this.
                None if self.gpus.len() >= MAX_GPUS => continue,
                None => {
                    let info = GpuInfo {
                        index: s.index,
                        name: format!("GPU {}", s.index),
                        uuid: String::new(),
                        pci_bus_id: String::new(),
                        memory_total: s.mem.map_or(0, |m| m.total),
                        mig_uuids: vec![],
                    };
                    self.gpus.push(GpuState::new(info));
                    new_gpus = true;
                    self.gpus.len() - 1
                }
            };
            let g = &mut self.gpus[pos];
            let used = s.mem.map(|m| m.used);
            g.used.push(t, used.map(|u| u as f64));
            if let Some(u) = used {
                g.peak.observe(t, u);
            }
            let newly_failed = s.error.is_some() && g.error() != s.error.as_deref();
            g.last = Some(s.clone());
            if newly_failed {
                let text = format!("GPU {}: {}", s.index, s.error.clone().unwrap_or_default());
                self.push_notice(Notice {
                    t,
                    source: StatusSource::Nvml,
                    level: Level::Error,
                    text,
                });
            }
            if s.error.is_none() {
                // Only as many as the model keeps (the largest): a tick listing 60k
                // processes would otherwise build state for all of them first (576 MB).
                let mut procs: Vec<_> = s.procs.iter().collect();
                if procs.len() > MAX_PROCESSES {
                    procs.select_nth_unstable_by_key(MAX_PROCESSES - 1, |p| {
                        std::cmp::Reverse(p.used)
                    });
                    procs.truncate(MAX_PROCESSES);
                }
                for p in procs {
                    self.observe_proc(t, s.index, p);
                }
            }
        }
        if !self.gpus.is_sorted_by_key(|g| g.info.index) {
            self.gpus.sort_by_key(|g| g.info.index);
            new_gpus = true;
        }
        if new_gpus {
            self.refresh_infos();
        }
        // Processes not listed this tick get a gap so their line breaks instead of flat-lining
        // (an exited one's series ends at its exit instead).
        let unreadable = self.unreadable();
        for p in self.procs.values_mut().filter(|p| p.exit.is_none()) {
            for pg in p.gpus.values_mut() {
                if pg.last_seen < t && pg.used.last_time() != Some(t) {
                    pg.used.push(t, None);
                    pg.last_used = None;
                }
            }
            if p.last_seen < t && !p.gpus.keys().any(|g| unreadable.contains(g)) {
                p.unlisted = p.unlisted.saturating_add(1);
            }
        }
        self.mark_exits(t);
        self.expire(t);
    }

    /// Processes unlisted past the grace whose companion (if any) is gone are exited, as of
    /// the later of their last sighting and their companion's disconnect.
    fn mark_exits(&mut self, now: Ts) {
        let unreadable = self.unreadable();
        for (pid, p) in self.procs.iter_mut().filter(|(_, p)| p.exit.is_none()) {
            let away = now - p.last_seen;
            let gone = away > EXIT_GRACE_MS
                || (p.unlisted >= EXIT_GRACE_TICKS && away >= EXIT_GRACE_MIN_MS);
            if !gone || self.companions.get(*pid).is_some() {
                continue;
            }
            // A card that cannot be read lists nobody: its processes are not known to be gone.
            if p.gpus.keys().any(|g| unreadable.contains(g)) {
                continue;
            }
            let ended = self.companions.ended.get(pid);
            let at = ended
                .and_then(|c| c.ended)
                .map_or(p.last_seen, |e| e.max(p.last_seen));
            let cause = ended.map_or(ExitCause::Exited, ExitCause::from_companion);
            p.exit = Some(Exit { at, cause });
            self.exits += 1;
        }
    }

    /// Cards whose last tick could not be read: they list nobody, so their processes are
    /// not known to be gone.
    fn unreadable(&self) -> Vec<u32> {
        self.gpus
            .iter()
            .filter(|g| g.error().is_some())
            .map(|g| g.info.index)
            .collect()
    }

    /// Processes a person can still look at after their exit, for the exporters, which
    /// keep a gone process only `PROCESS_GRACE_MS` (label cardinality).
    pub fn exported(&self, p: &ProcState) -> bool {
        p.exit.is_none_or(|e| self.now - e.at <= PROCESS_GRACE_MS)
    }

    fn observe_proc(&mut self, t: Ts, gpu: u32, sample: &ProcSample) {
        let ProcSample {
            pid, kind, used, ..
        } = *sample;
        let proc_state = self.procs.entry(pid).or_insert_with(|| {
            let info = ProcInfo {
                pid,
                ..ProcInfo::default()
            };
            ProcState::new(info, t)
        });
        if proc_state.exit.is_some() {
            if self.companions.ended.contains_key(&pid) {
                // Its companion said it ended: listed again, the pid is a new process's.
                let info = ProcInfo {
                    pid,
                    ..ProcInfo::default()
                };
                *proc_state = ProcState::new(info, t);
                self.companions.forget(pid);
            } else {
                // NVML alone lost it for a while: the same story goes on (a new process
                // with the same pid shows itself by its command line, `apply_proc_info`).
                proc_state.exit = None;
            }
        }
        let new = proc_state.gpus.is_empty() && proc_state.first_seen == t;
        proc_state.last_seen = t;
        proc_state.unlisted = 0;
        if sample.cpu.is_some() || sample.rss.is_some() {
            proc_state.cpu = sample.cpu;
            proc_state.rss = sample.rss;
        }
        let info = &proc_state.info;
        // The mapping is computed once per (process, GPU); /proc updates recompute it.
        let all = &self.infos;
        let pg = proc_state.gpus.entry(gpu).or_insert_with(|| ProcGpu {
            gpu,
            kind,
            used: Series::default(),
            last_used: None,
            peak: Peak::default(),
            last_seen: t,
            sm_util: None,
            mapping: logical_index(
                all,
                gpu,
                info.env_readable,
                info.cuda_visible_devices.as_deref(),
                info.cuda_device_order.as_deref(),
            ),
        });
        pg.kind = kind;
        pg.last_seen = t;
        pg.last_used = used;
        pg.sm_util = sample.sm_util;
        pg.used.push(t, used.map(|u| u as f64));
        if let Some(u) = used {
            pg.peak.observe(t, u);
        }
        if new {
            self.refresh_who(pid);
        }
    }

    /// A process's program, rank and job again, after its /proc facts or its hello came.
    fn refresh_who(&mut self, pid: u32) {
        let c = &self.companions;
        let hello = c
            .get(pid)
            .or(c.ended.get(&pid))
            .and_then(|c| c.hello.as_ref());
        if let Some(p) = self.procs.get_mut(&pid) {
            p.who = Identity::of(&p.info, hello);
        }
    }

    /// The distributed jobs among the processes listed (exited ranks too, while kept).
    pub fn jobs(&self) -> Vec<Job> {
        crate::model::job::group(self.procs.iter().map(|(pid, p)| (*pid, &p.who)))
    }

    /// The job `pid` is a rank of.
    pub fn job_of(&self, pid: u32) -> Option<Job> {
        self.jobs().into_iter().find(|j| j.has(pid))
    }

    fn apply_proc_info(&mut self, info: &ProcInfo) {
        let gpus_info = &self.infos;
        let now = self.now;
        let p = self
            .procs
            .entry(info.pid)
            .or_insert_with(|| ProcState::new(info.clone(), now));
        // /proc facts come for a pid NVML newly lists: another command line under a known
        // pid, or a pid listed again after its companion ended, is a new process.
        let other_cmd = matches!(
            (&p.info.cmdline, &info.cmdline),
            (Some(old), Some(new)) if old != new
        );
        let ended = p.exit.is_some() && self.companions.ended.contains_key(&info.pid);
        if other_cmd || ended {
            *p = ProcState::new(info.clone(), now);
            self.companions.forget(info.pid);
        }
        p.info = info.clone();
        let c = &self.companions;
        let hello = c
            .get(info.pid)
            .or(c.ended.get(&info.pid))
            .and_then(|c| c.hello.as_ref());
        p.who = Identity::of(&p.info, hello);
        for pg in p.gpus.values_mut() {
            pg.mapping = logical_index(
                gpus_info,
                pg.gpu,
                info.env_readable,
                info.cuda_visible_devices.as_deref(),
                info.cuda_device_order.as_deref(),
            );
        }
    }

    fn expire(&mut self, now: Ts) {
        let keep = self.keep_exited_ms;
        let pinned = &self.pinned;
        let companions = &mut self.companions;
        self.procs.retain(|pid, p| {
            let kept = match p.exit {
                None => true,
                Some(e) => pinned.contains(pid) || keep.is_none_or(|k| now - e.at <= k),
            };
            if !kept {
                companions.forget(*pid);
            }
            kept
        });
        let excess = self.procs.len().saturating_sub(MAX_PROCESSES);
        if excess > 0 {
            // The oldest in one pass, not one scan per removal: a tick listing
            // 60k processes took 46 s.
            let mut by_age: Vec<(Ts, u32)> = self
                .procs
                .iter()
                .map(|(pid, p)| (p.last_seen, *pid))
                .collect();
            by_age.select_nth_unstable(excess - 1);
            for (_, pid) in &by_age[..excess] {
                self.procs.remove(pid);
                self.companions.forget(*pid);
            }
        }
        self.companions.expire(now);
    }

    fn push_notice(&mut self, m: Notice) {
        if self.notices.len() == MAX_NOTICES {
            self.notices.pop_front();
        }
        self.notices.push_back(m);
    }

    /// Processes on `gpu`, largest current usage first (then by peak).
    pub fn procs_on(&self, gpu: u32) -> Vec<(&ProcState, &ProcGpu)> {
        let mut v: Vec<_> = self
            .procs
            .values()
            .filter(|p| self.exported(p))
            .filter_map(|p| p.gpus.get(&gpu).map(|pg| (p, pg)))
            .collect();
        v.sort_by(|a, b| {
            (b.1.last_used.unwrap_or(0), b.1.peak.value, a.0.info.pid).cmp(&(
                a.1.last_used.unwrap_or(0),
                a.1.peak.value,
                b.0.info.pid,
            ))
        });
        v
    }

    pub fn gpu(&self, index: u32) -> Option<&GpuState> {
        self.gpus.iter().find(|g| g.info.index == index)
    }

    /// Latest notice at warn level or above, for the status line.
    pub fn last_problem(&self) -> Option<&Notice> {
        self.notices.iter().rev().find(|m| m.level != Level::Info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::{MemInfo, ProcSample};

    fn header() -> Frame {
        Frame::Header(Header::bare(vec![GpuInfo {
            index: 0,
            name: "H200".into(),
            uuid: "GPU-1".into(),
            pci_bus_id: "0".into(),
            memory_total: 100,
            mig_uuids: vec![],
        }]))
    }

    /// A header claiming tens of thousands of GPUs is bounded, not allocated.
    #[test]
    fn a_header_keeps_at_most_max_gpus() {
        let gpus: Vec<GpuInfo> = (0..48_000u32)
            .map(|i| GpuInfo {
                index: i,
                name: "H200".into(),
                uuid: format!("GPU-{i}"),
                pci_bus_id: String::new(),
                memory_total: 100,
                mig_uuids: vec![],
            })
            .collect();
        let t0 = std::time::Instant::now();
        let mut s = State::default();
        s.apply(&Frame::Header(Header::bare(gpus)));
        assert_eq!(s.gpus.len(), MAX_GPUS);
        assert_eq!(s.header.as_ref().map(|h| h.gpus.len()), Some(MAX_GPUS));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t0.elapsed()
        );
    }

    fn tick(t: Ts, used: Option<u64>, procs: &[(u32, u64)]) -> Frame {
        Frame::Tick(Tick {
            t,
            gpus: vec![GpuSample {
                index: 0,
                mem: used.map(|u| MemInfo {
                    total: 100,
                    used: u,
                    free: 100 - u,
                    reserved: 0,
                }),
                util: None,
                temp_c: None,
                power_mw: None,
                procs: procs
                    .iter()
                    .map(|&(pid, u)| ProcSample {
                        pid,
                        kind: ProcKind::Compute,
                        used: Some(u),
                        ..ProcSample::default()
                    })
                    .collect(),
                error: used.is_none().then(|| "GPU is lost".to_string()),
            }],
        })
    }

    #[test]
    fn failed_tick_is_a_gap_and_a_message_and_keeps_peak() {
        let mut s = State::default();
        s.apply(&header());
        s.apply(&tick(1_000, Some(40), &[(7, 30)]));
        s.apply(&tick(2_000, None, &[]));
        s.apply(&tick(3_000, Some(20), &[(7, 10)]));
        let g = s.gpu(0).expect("gpu 0 from header");
        assert_eq!(
            g.peak,
            Peak {
                value: 40,
                at: 1_000
            }
        );
        assert!(g.used.window(0, 5_000)[1].is_gap());
        assert_eq!(
            s.last_problem().map(|m| m.text.as_str()),
            Some("GPU 0: GPU is lost")
        );
        let p = &s.procs[&7].gpus[&0];
        assert_eq!(p.peak.value, 30);
        assert_eq!(p.last_used, Some(10));
    }

    #[test]
    fn processes_sorted_by_usage_and_exited_ones_kept_then_dropped() {
        let mut s = State::default();
        s.apply(&header());
        s.apply(&tick(1_000, Some(50), &[(1, 5), (2, 40)]));
        let order: Vec<u32> = s.procs_on(0).iter().map(|(p, _)| p.info.pid).collect();
        assert_eq!(order, vec![2, 1]);
        s.apply(&tick(2_000, Some(50), &[(2, 40)]));
        assert_eq!(
            s.procs[&1].gpus[&0].last_used, None,
            "missing process becomes a gap"
        );
        assert_eq!(s.procs[&1].exit, None, "a tick or two missed is no exit");
        s.apply(&tick(2_000 + EXIT_GRACE_MS + 1, Some(50), &[(2, 40)]));
        let exit = s.procs[&1].exit.expect("unlisted past the grace: exited");
        assert_eq!((exit.at, exit.cause), (1_000, ExitCause::Exited));
        let t = 1_000 + KEEP_EXITED_LIVE_MS;
        s.apply(&tick(t, Some(50), &[(2, 40)]));
        assert!(s.procs.contains_key(&1), "kept {KEEP_EXITED_LIVE_MS} ms");
        assert!(
            s.procs_on(0).iter().all(|(p, _)| p.info.pid != 1),
            "exports forget it after {PROCESS_GRACE_MS} ms"
        );
        s.apply(&tick(t + 1, Some(50), &[(2, 40)]));
        assert!(!s.procs.contains_key(&1));
        assert!(s.procs.contains_key(&2));
    }

    #[test]
    fn an_exited_process_keeps_its_series_to_the_exit_and_no_gaps_after() {
        let mut s = State {
            keep_exited_ms: None,
            ..State::default()
        };
        s.apply(&header());
        for i in 1..=5 {
            s.apply(&tick(i * 1_000, Some(50), &[(1, 10 * i as u64)]));
        }
        for i in 6..=600 {
            s.apply(&tick(i * 1_000, Some(0), &[]));
        }
        let p = &s.procs[&1];
        assert_eq!(p.exit.map(|e| e.at), Some(5_000));
        assert_eq!(p.until(s.now), 5_000);
        let pg = &p.gpus[&0];
        assert_eq!(pg.peak.value, 50);
        let gaps = pg
            .used
            .window(0, 600_000)
            .iter()
            .filter(|b| b.is_gap())
            .count();
        assert!(
            gaps <= 4,
            "gaps only within the grace, not for 10 min: {gaps}"
        );
        // Listed again under another command line: the pid was reused, a new story.
        let info = |t: Ts, cmd: &str| Frame::Procs {
            t,
            procs: vec![ProcInfo {
                pid: 1,
                cmdline: Some(cmd.into()),
                ..ProcInfo::default()
            }],
        };
        s.apply(&info(601_000, "python3 train.py"));
        s.apply(&tick(601_000, Some(7), &[(1, 7)]));
        assert_eq!(
            s.procs[&1].first_seen, 1_000,
            "the same process, NVML lost it"
        );
        assert_eq!(s.procs[&1].exit, None);
        for i in 602..=606 {
            s.apply(&tick(i * 1_000, Some(0), &[]));
        }
        assert!(s.procs[&1].exit.is_some());
        s.apply(&info(607_000, "python3 other.py"));
        s.apply(&tick(607_000, Some(7), &[(1, 7)]));
        let p = &s.procs[&1];
        assert_eq!(
            (p.exit, p.first_seen, p.gpus[&0].peak.value),
            (None, 607_000, 7)
        );
    }

    #[test]
    fn a_card_that_cannot_be_read_does_not_end_its_processes() {
        let mut s = State::default();
        s.apply(&header());
        s.apply(&tick(1_000, Some(50), &[(1, 10)]));
        for i in 2..=12 {
            s.apply(&tick(i * 1_000, None, &[]));
        }
        assert_eq!(s.procs[&1].exit, None, "unknown while the card is lost");
        s.apply(&tick(13_000, Some(50), &[(1, 12)]));
        let p = &s.procs[&1];
        assert_eq!((p.first_seen, p.gpus[&0].peak.value), (1_000, 12));
    }

    #[test]
    fn a_pinned_process_outlives_the_keep_time_and_the_cause_comes_from_its_companion() {
        use crate::model::frame::CompanionFrame;
        use crate::wire::{EpochRecord, FrameworkEvent, Message};
        let mut s = State::default();
        s.apply(&header());
        let msg = |t, msg| Frame::Companion(CompanionFrame { t, pid: 3, msg });
        s.apply(&tick(1_000, Some(50), &[(3, 10)]));
        s.apply(&msg(
            1_500,
            Message::Epoch(EpochRecord {
                epoch: 0,
                ..EpochRecord::default()
            }),
        ));
        s.apply(&msg(
            1_800,
            Message::Event(FrameworkEvent {
                kind: "oom".into(),
                ..FrameworkEvent::default()
            }),
        ));
        s.apply(&tick(2_000, Some(50), &[(3, 10)]));
        s.apply(&msg(
            2_200,
            Message::Disconnected(crate::wire::Disconnected::default()),
        ));
        s.pinned.insert(3);
        s.apply(&tick(2_000 + EXIT_GRACE_MS + 1, Some(0), &[]));
        let exit = s.procs[&3].exit.expect("exited");
        assert_eq!((exit.at, exit.cause), (2_200, ExitCause::Oom));
        s.apply(&tick(2_200 + KEEP_EXITED_LIVE_MS + 1, Some(0), &[]));
        assert!(s.procs.contains_key(&3), "pinned by an alert");
        assert!(s.companions.latest(3).is_some(), "with its allocator state");
        s.pinned.clear();
        s.apply(&tick(2_200 + KEEP_EXITED_LIVE_MS + 2, Some(0), &[]));
        assert!(!s.procs.contains_key(&3));
        assert!(s.companions.latest(3).is_none(), "forgotten together");
    }

    #[test]
    fn proc_info_updates_mapping() {
        let mut s = State::default();
        s.apply(&header());
        s.apply(&tick(1_000, Some(50), &[(9, 5)]));
        assert_eq!(s.procs[&9].gpus[&0].mapping, Mapping::Unknown);
        s.apply(&Frame::Procs {
            t: 1_000,
            procs: vec![ProcInfo {
                pid: 9,
                env_readable: true,
                cuda_visible_devices: Some("0".into()),
                ..ProcInfo::default()
            }],
        });
        assert_eq!(s.procs[&9].gpus[&0].mapping.label(), "cuda:0");
    }
}
