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
}

impl Filter {
    /// From `--gpu` ids (indices or UUID prefixes), `--user` names or uids and `--pid`s.
    pub fn new(gpu: &[String], user: &[String], pid: &[u32]) -> Result<Filter> {
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
                Ok(uid) => crate::source::procfs::user_name(uid).unwrap_or_else(|| uid.to_string()),
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
                }
                Some(Cow::Borrowed(f))
            }
            Frame::Tick(t) => {
                let mut t = t.clone();
                t.gpus.retain(|g| self.keep_index(g.index));
                for g in &mut t.gpus {
                    g.procs.retain(|p| self.keep_pid(p.pid));
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
        Filter::new(&strings(gpu), &strings(user), pid).expect("valid filter")
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
    fn nonsense_gpu_ids_are_refused() {
        assert!(Filter::new(&["x".into()], &[], &[]).is_err());
        assert!(filter(&[], &[], &[]).is_empty());
    }
}
