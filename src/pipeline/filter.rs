//! Which GPUs and processes to watch (`--gpu 0,2`, `--user alice`, `--pid 4242`), like nvitop's
//! `-o/-u/-p` and nvtop's `-s`. One type answers "is this GPU / process kept?" so every place
//! that needs the answer agrees: the pipeline applies it to frames as they arrive (so the view,
//! the alerts, the recording and every export see the same subset), and a TUI filter key can
//! ask the same predicates (`keep_gpu`, `keep_process`) when it reads the state.
//!
//! GPUs are left out of the state but not out of the header's GPU list that the
//! `CUDA_VISIBLE_DEVICES` mapping reads (`State::gpu_infos`), so `cuda:N` stays right for the
//! cards that remain.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use anyhow::{Result, bail};

use crate::model::frame::Frame;
use crate::model::sample::GpuInfo;
use crate::model::state::State;
use crate::model::time::Ts;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSel {
    Index(u32),
    /// A UUID or a unique prefix of one (`GPU-3f2a`), compared case-insensitively.
    Uuid(String),
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    gpus: Vec<GpuSel>,
    /// User names; numeric uids are resolved to names when the filter is built.
    users: Vec<String>,
    pids: BTreeSet<u32>,
    /// NVML indices kept, resolved from the last header (UUIDs need it).
    kept_gpus: Option<BTreeSet<u32>>,
    /// Owner of every process seen in a `Procs` frame (None: unreadable).
    owners: HashMap<u32, Option<String>>,
    /// Data time since which `--user`/`--pid` have kept no process (None: they keep one);
    /// past `QUIET_MS` the filter says so once, so a job does not export nothing for hours
    /// in silence.
    unmatched_since: Option<Ts>,
    quiet_told: bool,
    notice: Option<String>,
}

/// How long `--user`/`--pid` may keep no process before the filter says so.
pub const QUIET_MS: i64 = 60_000;

impl Filter {
    /// From `--gpu` ids (indices or UUID prefixes), `--user` names or uids and `--pid`s.
    /// `user_name` turns a numeric uid into the name processes carry (the runner passes
    /// `source::procfs::user_name`: the pipeline itself reads no files).
    pub fn new(
        gpu: &[String],
        user: &[String],
        pid: &[u32],
        user_name: impl Fn(u32) -> Option<String>,
    ) -> Result<Filter> {
        let mut gpus = Vec::new();
        for g in gpu {
            let g = g.trim();
            if g.is_empty() {
                bail!("--gpu: empty GPU id; use indices or UUIDs, e.g. --gpu 0,2");
            }
            gpus.push(match g.parse::<u32>() {
                Ok(i) => GpuSel::Index(i),
                Err(_) if g.len() >= 4 => GpuSel::Uuid(g.to_ascii_lowercase()),
                Err(_) => bail!("--gpu: '{g}' is neither an index nor a GPU UUID"),
            });
        }
        let users = user
            .iter()
            .map(|u| match u.trim().parse::<u32>() {
                Ok(uid) => user_name(uid).unwrap_or_else(|| uid.to_string()),
                Err(_) => u.trim().to_string(),
            })
            .collect();
        Ok(Filter {
            gpus,
            users,
            pids: pid.iter().copied().collect(),
            ..Filter::default()
        })
    }

    /// What `--gpu` finds among `gpus`: an error naming the GPUs there are when a selector
    /// matches none, and the candidates when a UUID prefix matches several.
    pub fn check_gpus(&self, gpus: &[GpuInfo]) -> Result<(), String> {
        // Short enough for a status line: the index and the UUID up to where it differs
        // from every other GPU's (at least 8 hex digits).
        let short = |u: &str| {
            let b = u.as_bytes();
            let common = gpus
                .iter()
                .filter(|g| g.uuid != u)
                .map(|g| g.uuid.bytes().zip(b).take_while(|(x, y)| x == *y).count())
                .max()
                .unwrap_or(0);
            let n = (common + 1).max("GPU-".len() + 8);
            // Not worth an ellipsis for a character or two.
            let n = if n + 2 >= u.len() { u.len() } else { n };
            let cut = if n < u.len() { "…" } else { "" };
            format!("{}{cut}", u.get(..n).unwrap_or(u))
        };
        let here = || {
            if gpus.is_empty() {
                return "no GPU could be read".to_string();
            }
            let list: Vec<String> = gpus
                .iter()
                .map(|g| format!("{} {}", g.index, short(&g.uuid)))
                .collect();
            format!("the GPUs are {}", list.join(", "))
        };
        // Selectors are kept lowercase; NVML spells the prefix `GPU-`.
        let shown = |u: &str| match u.strip_prefix("gpu-") {
            Some(rest) => format!("GPU-{rest}"),
            None => u.to_string(),
        };
        for sel in &self.gpus {
            let one = Filter {
                gpus: vec![sel.clone()],
                ..Filter::default()
            };
            let hits: Vec<&GpuInfo> = gpus.iter().filter(|g| one.keep_gpu(g)).collect();
            match (sel, hits.len()) {
                (GpuSel::Index(i), 0) => {
                    return Err(format!("--gpu {i} matches no GPU: {}", here()));
                }
                (GpuSel::Uuid(u), 0) => {
                    return Err(format!("--gpu {u} matches no GPU: {}", here()));
                }
                (GpuSel::Uuid(u), n) if n > 1 => {
                    let list: Vec<String> = hits
                        .iter()
                        .map(|g| format!("{} (GPU {})", short(&g.uuid), g.index))
                        .collect();
                    return Err(format!(
                        "--gpu {} is ambiguous: it matches {}; give more of the UUID",
                        shown(u),
                        list.join(" and ")
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A notice the filter has for the user (a `--user`/`--pid` that has kept nothing for
    /// `QUIET_MS`, a `--gpu` a recording's GPUs do not match), once.
    pub fn take_notice(&mut self) -> Option<String> {
        self.notice.take()
    }

    fn processes_filtered(&self) -> bool {
        !self.users.is_empty() || !self.pids.is_empty()
    }

    /// After a tick: has any process been kept for a while?
    fn note_matches(&mut self, t: Ts, kept: bool) {
        if kept {
            self.unmatched_since = None;
            self.quiet_told = false;
            return;
        }
        let since = *self.unmatched_since.get_or_insert(t);
        if !self.quiet_told && t.saturating_sub(since) >= QUIET_MS {
            self.quiet_told = true;
            let mut what = Vec::new();
            if !self.users.is_empty() {
                what.push(format!("--user {}", self.users.join(",")));
            }
            if !self.pids.is_empty() {
                let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
                what.push(format!("--pid {}", pids.join(",")));
            }
            self.notice = Some(format!(
                "{} has matched no GPU process for {}",
                what.join(" "),
                crate::fmt::rough_duration(t.saturating_sub(since))
            ));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty() && self.users.is_empty() && self.pids.is_empty()
    }

    pub fn keep_gpu(&self, info: &GpuInfo) -> bool {
        self.gpus.is_empty()
            || self.gpus.iter().any(|s| match s {
                GpuSel::Index(i) => *i == info.index,
                GpuSel::Uuid(u) => {
                    let uuid = info.uuid.to_ascii_lowercase();
                    uuid.starts_with(u.as_str())
                        || uuid
                            .strip_prefix("gpu-")
                            .is_some_and(|x| x.starts_with(u.as_str()))
                        || info.mig_uuids.iter().any(|m| m.to_ascii_lowercase() == *u)
                }
            })
    }

    /// A process is kept when it passes the pid list and the user list; with a user list, a
    /// process whose owner is not known (yet, or unreadable) is left out.
    pub fn keep_process(&self, pid: u32, user: Option<&str>) -> bool {
        (self.pids.is_empty() || self.pids.contains(&pid))
            && (self.users.is_empty() || user.is_some_and(|u| self.users.iter().any(|x| x == u)))
    }

    fn keep_pid(&self, pid: u32) -> bool {
        let user = self.owners.get(&pid).and_then(|u| u.as_deref());
        self.keep_process(pid, user)
    }

    fn keep_index(&self, index: u32) -> bool {
        self.kept_gpus.as_ref().is_none_or(|k| k.contains(&index))
    }

    /// The frame with what the filter leaves out removed; None when nothing of it is kept.
    pub fn frame<'a>(&mut self, f: &'a Frame) -> Option<Cow<'a, Frame>> {
        if self.is_empty() {
            return Some(Cow::Borrowed(f));
        }
        match f {
            Frame::Header(h) => {
                if !self.gpus.is_empty() {
                    let kept = h.gpus.iter().filter(|g| self.keep_gpu(g)).map(|g| g.index);
                    self.kept_gpus = Some(kept.collect());
                    // Live modes refuse this before they start (`check_gpus`); a recording
                    // from another machine is still played, with the reason nothing shows.
                    if let Err(e) = self.check_gpus(&h.gpus) {
                        self.notice = Some(e);
                    }
                }
                Some(Cow::Borrowed(f))
            }
            Frame::Tick(t) => {
                let mut t = t.clone();
                t.gpus.retain(|g| self.keep_index(g.index));
                for g in &mut t.gpus {
                    g.procs.retain(|p| self.keep_pid(p.pid));
                }
                if self.processes_filtered() {
                    let kept = t.gpus.iter().any(|g| !g.procs.is_empty());
                    self.note_matches(t.t, kept);
                }
                Some(Cow::Owned(Frame::Tick(t)))
            }
            Frame::Procs { t, procs } => {
                for p in procs {
                    self.owners.insert(p.pid, p.user.clone());
                }
                let procs: Vec<_> = procs
                    .iter()
                    .filter(|p| self.keep_pid(p.pid))
                    .cloned()
                    .collect();
                (!procs.is_empty()).then_some(Cow::Owned(Frame::Procs { t: *t, procs }))
            }
            Frame::Companion(c) => self.keep_pid(c.pid).then_some(Cow::Borrowed(f)),
            Frame::Status { .. } | Frame::Alert(_) => Some(Cow::Borrowed(f)),
        }
    }

    /// After a header: drop the GPUs left out from the state's GPU list (their static facts
    /// stay in `State::gpu_infos` for the index mapping).
    pub fn prune(&self, state: &mut State) {
        if self.kept_gpus.is_some() {
            state.gpus.retain(|g| self.keep_index(g.info.index));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::Header;
    use crate::model::sample::{GpuSample, ProcInfo, ProcSample, Tick};

    fn info(index: u32, uuid: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: "H200".into(),
            uuid: uuid.into(),
            pci_bus_id: String::new(),
            memory_total: 1 << 30,
            mig_uuids: vec![],
        }
    }

    fn header() -> Frame {
        let gpus = (0..3)
            .map(|i| info(i, &format!("GPU-{i}aaa-bbbb")))
            .collect();
        Frame::Header(Header::bare(gpus))
    }

    fn tick() -> Frame {
        let sample = |index, pids: &[u32]| GpuSample {
            index,
            mem: None,
            util: None,
            temp_c: None,
            power_mw: None,
            procs: pids
                .iter()
                .map(|&pid| ProcSample {
                    pid,
                    kind: Default::default(),
                    used: Some(1),
                    ..ProcSample::default()
                })
                .collect(),
            error: None,
        };
        Frame::Tick(Tick {
            t: 1,
            gpus: vec![sample(0, &[10, 11]), sample(1, &[12]), sample(2, &[])],
        })
    }

    fn filter(gpu: &[&str], user: &[&str], pid: &[u32]) -> Filter {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let name = |uid: u32| (uid == 1000).then(|| "alice".to_string());
        Filter::new(&strings(gpu), &strings(user), pid, name).expect("valid filter")
    }

    fn apply(f: &mut Filter, frames: &[Frame]) -> State {
        let mut state = State::default();
        for fr in frames {
            if let Some(kept) = f.frame(fr) {
                state.apply(&kept);
                if matches!(fr, Frame::Header(_)) {
                    f.prune(&mut state);
                }
            }
        }
        state
    }

    #[test]
    fn gpus_by_index_and_uuid_prefix() {
        let mut f = filter(&["0", "GPU-2aaa"], &[], &[]);
        let s = apply(&mut f, &[header(), tick()]);
        let idx: Vec<u32> = s.gpus.iter().map(|g| g.info.index).collect();
        assert_eq!(idx, vec![0, 2]);
        assert_eq!(s.gpu_infos().len(), 3, "the mapping still sees every card");
    }

    #[test]
    fn processes_by_pid_and_by_user() {
        let mut f = filter(&[], &[], &[11]);
        let Some(Cow::Owned(Frame::Tick(t))) = f.frame(&tick()) else {
            panic!("tick kept");
        };
        assert_eq!(
            t.gpus[0].procs.iter().map(|p| p.pid).collect::<Vec<_>>(),
            vec![11]
        );
        assert!(t.gpus[1].procs.is_empty());

        let mut f = filter(&[], &["alice"], &[]);
        let procs = Frame::Procs {
            t: 0,
            procs: [(10, "alice"), (12, "bob")]
                .iter()
                .map(|(pid, u)| ProcInfo {
                    pid: *pid,
                    user: Some(u.to_string()),
                    ..ProcInfo::default()
                })
                .collect(),
        };
        let Some(Cow::Owned(Frame::Procs { procs: kept, .. })) = f.frame(&procs) else {
            panic!("alice kept");
        };
        assert_eq!(kept.len(), 1);
        let by_uid = filter(&[], &["1000"], &[]);
        assert!(
            by_uid.keep_process(10, Some("alice")),
            "uid 1000 is alice here"
        );
        assert!(!by_uid.keep_process(12, Some("bob")));
        let Some(Cow::Owned(Frame::Tick(t))) = f.frame(&tick()) else {
            panic!("tick kept");
        };
        let pids: Vec<u32> = t
            .gpus
            .iter()
            .flat_map(|g| g.procs.iter().map(|p| p.pid))
            .collect();
        assert_eq!(pids, vec![10], "11 has no known owner, 12 is bob's");
    }

    #[test]
    fn a_gpu_selector_matching_none_or_several_is_named() {
        let gpus: Vec<GpuInfo> = (0..2)
            .map(|i| info(i, &format!("GPU-{i}aaa-bbbb")))
            .collect();
        assert_eq!(filter(&["0", "GPU-1a"], &[], &[]).check_gpus(&gpus), Ok(()));
        let e = filter(&["7"], &[], &[])
            .check_gpus(&gpus)
            .expect_err("no GPU 7");
        assert_eq!(
            e,
            "--gpu 7 matches no GPU: the GPUs are 0 GPU-0aaa-bbbb, 1 GPU-1aaa-bbbb"
        );
        let e = filter(&["GPU-"], &[], &[])
            .check_gpus(&gpus)
            .expect_err("ambiguous");
        assert!(
            e.contains("ambiguous")
                && e.contains("GPU-0aaa-bbbb (GPU 0)")
                && e.contains("GPU-1aaa-bbbb (GPU 1)"),
            "{e}"
        );
        let e = filter(&["0"], &[], &[])
            .check_gpus(&[])
            .expect_err("no GPUs");
        assert!(e.ends_with("no GPU could be read"), "{e}");
        // UUIDs are cut where they differ from every other GPU's, 8 hex digits at least.
        let twins = [
            info(0, "GPU-12345678-aaaa-0000-0000-000000000000"),
            info(1, "GPU-12345678-aaab-0000-0000-000000000000"),
            info(2, "GPU-fedcba98-0000-0000-0000-000000000000"),
        ];
        let e = filter(&["9"], &[], &[])
            .check_gpus(&twins)
            .expect_err("no GPU 9");
        assert!(
            e.ends_with("0 GPU-12345678-aaaa…, 1 GPU-12345678-aaab…, 2 GPU-fedcba98…"),
            "{e}"
        );
        // A recording's header the filter does not match: kept playing, with a notice.
        let mut f = filter(&["7"], &[], &[]);
        assert!(f.frame(&header()).is_some());
        assert!(
            f.take_notice()
                .is_some_and(|n| n.starts_with("--gpu 7 matches no GPU"))
        );
        assert_eq!(f.take_notice(), None, "said once");
    }

    #[test]
    fn a_process_filter_that_keeps_nothing_for_a_while_says_so_once() {
        let at = |t: i64, pids: &[u32]| {
            let Frame::Tick(mut tick) = tick() else {
                unreachable!()
            };
            tick.t = t;
            tick.gpus[0].procs.retain(|p| pids.contains(&p.pid));
            tick.gpus[1].procs.clear();
            Frame::Tick(tick)
        };
        let mut f = filter(&[], &[], &[99]);
        f.frame(&at(0, &[10]));
        f.frame(&at(QUIET_MS - 1, &[10]));
        assert_eq!(f.take_notice(), None, "not yet");
        f.frame(&at(QUIET_MS, &[10]));
        assert_eq!(
            f.take_notice().as_deref(),
            Some("--pid 99 has matched no GPU process for ~1 min")
        );
        f.frame(&at(3 * QUIET_MS, &[10]));
        assert_eq!(f.take_notice(), None, "once");
        // A match re-arms it.
        let mut f = filter(&[], &[], &[10]);
        f.frame(&at(0, &[]));
        f.frame(&at(QUIET_MS / 2, &[10]));
        f.frame(&at(QUIET_MS, &[]));
        assert_eq!(f.take_notice(), None, "matched half-way");
        f.frame(&at(2 * QUIET_MS, &[]));
        assert!(f.take_notice().is_some());
        // Without a process filter, nothing to say.
        let mut f = filter(&["0"], &[], &[]);
        f.frame(&at(0, &[]));
        f.frame(&at(10 * QUIET_MS, &[]));
        assert_eq!(f.take_notice(), None);
    }

    #[test]
    fn nonsense_gpu_ids_are_refused() {
        assert!(Filter::new(&["x".into()], &[], &[], |_| None).is_err());
        assert!(filter(&[], &[], &[]).is_empty());
    }
}
