//! What the process lists show and in which order: sort key and direction, the `/`
//! filter, and the identities the selection holds (a PID on a GPU, an alert), so that a
//! re-sort or a new alert never moves the cursor onto something else. Pure: no I/O.

use crate::model::alerts::config::GrowthConfig;
use crate::model::alerts::{Alert, AlertKey};
use crate::model::job::Job;
use crate::model::state::{ProcGpu, ProcState, State};
use crate::model::time::Ts;

/// Columns a process list can be sorted by (`s`/F6 cycles, `I` inverts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Used,
    Peak,
    Growth,
    Pid,
    Name,
}

impl SortKey {
    /// The key `s`/F6 moves on to.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Used => SortKey::Peak,
            SortKey::Peak => SortKey::Growth,
            SortKey::Growth => SortKey::Pid,
            SortKey::Pid => SortKey::Name,
            SortKey::Name => SortKey::Used,
        }
    }

    /// The column header the sort is shown on.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Used => "USED",
            SortKey::Peak => "PEAK",
            SortKey::Growth => "GROWTH",
            SortKey::Pid => "PID",
            SortKey::Name => "COMMAND",
        }
    }

    /// Largest first for amounts, smallest first for identities (as htop does).
    pub fn default_desc(self) -> bool {
        matches!(self, SortKey::Used | SortKey::Peak | SortKey::Growth)
    }
}

/// Sort key and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub desc: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Sort {
            key: SortKey::Used,
            desc: true,
        }
    }
}

impl Sort {
    /// `USED▼`: the header label of the sorted column with its direction.
    pub fn label(self, ascii: bool) -> String {
        let arrow = match (self.desc, ascii) {
            (true, false) => "▼",
            (false, false) => "▲",
            (true, true) => "v",
            (false, true) => "^",
        };
        format!("{}{arrow}", self.key.column())
    }
}

/// The GROWTH column's rate, bytes per minute (`model::growth_rate`); 0 while unknown.
pub fn growth(s: &State, pid: u32, gpu: u32) -> Option<f64> {
    crate::model::growth_rate::per_minute(s, pid, gpu, &GrowthConfig::default())
}

/// The name a process is sorted and filtered by: its program's command line (a
/// multiprocessing child's launcher's), else its own, else its name.
pub fn name(p: &ProcState) -> &str {
    p.who
        .program
        .as_deref()
        .or(p.info.cmdline.as_deref())
        .or(p.info.name.as_deref())
        .unwrap_or("")
}

/// Whether `p` passes the filter: a case-insensitive substring of its command, name or
/// user, or of its PID (so `/12` finds 1234).
pub fn matches(p: &ProcState, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let f = filter.to_lowercase();
    let has = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(&f));
    p.info.pid.to_string().contains(&f)
        || has(p.info.cmdline.as_deref())
        || has(p.who.program.as_deref())
        || has(Some(p.who.rank_prefix().as_str()))
        || has(p.info.name.as_deref())
        || has(p.info.user.as_deref())
}

/// Processes on `gpu` that pass `filter`, in `sort` order (ties by PID, so the order is
/// stable between frames).
pub fn rows<'a>(
    s: &'a State,
    gpu: u32,
    sort: Sort,
    filter: &str,
) -> Vec<(&'a ProcState, &'a ProcGpu)> {
    let v: Vec<_> = s
        .procs
        .values()
        .filter(|p| matches(p, filter))
        .filter_map(|p| p.gpus.get(&gpu).map(|pg| (p, pg)))
        .collect();
    // Growth reads a window of the series: compute it once per row, not per comparison
    // (this runs after every frame to find the selection again).
    let rate = |p: &ProcState| match sort.key {
        SortKey::Growth => growth(s, p.info.pid, gpu).unwrap_or(0.0),
        _ => 0.0,
    };
    let mut keyed: Vec<_> = v.into_iter().map(|r| (rate(r.0), r)).collect();
    keyed.sort_by(|(ga, a), (gb, b)| {
        let ord = match sort.key {
            SortKey::Used => a.1.last_used.unwrap_or(0).cmp(&b.1.last_used.unwrap_or(0)),
            SortKey::Peak => a.1.peak.value.cmp(&b.1.peak.value),
            SortKey::Growth => ga.total_cmp(gb),
            SortKey::Pid => a.0.info.pid.cmp(&b.0.info.pid),
            SortKey::Name => name(a.0).cmp(name(b.0)),
        };
        let ord = if sort.desc { ord.reverse() } else { ord };
        ord.then(a.0.info.pid.cmp(&b.0.info.pid))
    });
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// The jobs with two or more ranks on `gpu`: the ones its list groups (a job with one rank
/// per card shows each rank on its own card).
pub fn jobs_on(s: &State, gpu: u32) -> Vec<Job> {
    s.jobs()
        .into_iter()
        .filter(|j| {
            let here = j.members.iter().filter(|m| {
                s.procs
                    .get(&m.pid)
                    .is_some_and(|p| p.gpus.contains_key(&gpu))
            });
            here.count() >= 2
        })
        .collect()
}

/// The first rank of `job` listed on `gpu`: the row a folded job is drawn on, selected by
/// and opened by.
pub fn job_lead(s: &State, job: &Job, gpu: u32) -> Option<u32> {
    job.members
        .iter()
        .map(|m| m.pid)
        .find(|pid| s.procs.get(pid).is_some_and(|p| p.gpus.contains_key(&gpu)))
}

/// A sorted, filtered list with each job's ranks together where its first rank sorts (so
/// sort and filter apply to jobs), in rank order; `folded`, a job is one row, its lead's.
pub fn group_jobs<'a>(
    s: &'a State,
    gpu: u32,
    rows: Vec<(&'a ProcState, &'a ProcGpu)>,
    jobs: &[Job],
    folded: bool,
) -> Vec<(&'a ProcState, &'a ProcGpu)> {
    if jobs.is_empty() {
        return rows;
    }
    let passed: std::collections::BTreeSet<u32> = rows.iter().map(|(p, _)| p.info.pid).collect();
    let mut done: Vec<usize> = Vec::new();
    let mut out = Vec::with_capacity(rows.len());
    for (p, pg) in rows {
        let Some(j) = jobs.iter().position(|j| j.has(p.info.pid)) else {
            out.push((p, pg));
            continue;
        };
        if done.contains(&j) {
            continue;
        }
        done.push(j);
        let here = |pid: &u32| {
            s.procs
                .get(pid)
                .and_then(|p| p.gpus.get(&gpu).map(|pg| (p, pg)))
        };
        if folded {
            // The lead stands for the job even when only another rank passed the filter.
            out.extend(job_lead(s, &jobs[j], gpu).as_ref().and_then(here));
        } else {
            out.extend(
                jobs[j]
                    .members
                    .iter()
                    .map(|m| m.pid)
                    .filter(|pid| passed.contains(pid))
                    .filter_map(|pid| here(&pid)),
            );
        }
    }
    out
}

/// An alert's identity: the same kind, process and GPU raised at the same time. (The key
/// alone is not enough: a cleared alert in history and a new one can share it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AlertId {
    pub key: AlertKey,
    pub raised_at: Ts,
}

impl AlertId {
    pub fn of(a: &Alert) -> AlertId {
        AlertId {
            key: a.key(),
            raised_at: a.raised_at,
        }
    }
}

/// Where a held identity is in a freshly built list: its index, or the neighbour that
/// takes its place (same index, clamped) when it is gone. `None` for an empty list.
pub fn locate<T: PartialEq>(
    items: &[T],
    held: Option<&T>,
    last_index: usize,
) -> Option<(usize, bool)> {
    if items.is_empty() {
        return None;
    }
    match held.and_then(|h| items.iter().position(|x| x == h)) {
        Some(i) => Some((i, true)),
        None => Some((last_index.min(items.len() - 1), false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_item_is_found_after_a_reorder_and_a_gone_one_gives_its_neighbour() {
        assert_eq!(locate(&[3, 1, 2], Some(&2), 0), Some((2, true)));
        assert_eq!(locate(&[3, 1], Some(&2), 2), Some((1, false)));
        assert_eq!(locate(&[3, 1], None, 0), Some((0, false)));
        assert_eq!(locate::<u32>(&[], Some(&2), 0), None);
    }

    #[test]
    fn the_filter_matches_command_name_user_and_pid() {
        use crate::model::sample::ProcInfo;
        let p = ProcState::new(
            ProcInfo {
                pid: 1234,
                user: Some("alice".into()),
                name: Some("python3".into()),
                cmdline: Some("python3 train_bert.py --lr 3e-4".into()),
                ..ProcInfo::default()
            },
            0,
        );
        for f in ["", "BERT", "python", "ALICE", "23", "1234"] {
            assert!(matches(&p, f), "{f:?} should match");
        }
        for f in ["bob", "999", "resnet"] {
            assert!(!matches(&p, f), "{f:?} should not match");
        }
    }

    /// Two ranks of a job (lead 11, rank 1 = 12, the busiest), a stranger between them.
    fn job_state() -> State {
        use crate::model::frame::Frame;
        use crate::model::sample::{GpuSample, MemInfo, ProcInfo, ProcSample, Tick};
        let mut s = State::default();
        let rank = |pid: u32, r: u32| ProcInfo {
            pid,
            cmdline: Some("python3 train.py".into()),
            rank: Some(r),
            world_size: Some(2),
            master: Some("127.0.0.1:29500".into()),
            ..ProcInfo::default()
        };
        let other = ProcInfo {
            pid: 20,
            cmdline: Some("python3 eval.py".into()),
            ..ProcInfo::default()
        };
        s.apply(&Frame::Procs {
            t: 0,
            procs: vec![rank(11, 0), rank(12, 1), other],
        });
        let ps = |pid, used| ProcSample {
            pid,
            kind: Default::default(),
            used: Some(used),
            ..ProcSample::default()
        };
        s.apply(&Frame::Tick(Tick {
            t: 0,
            gpus: vec![GpuSample {
                index: 0,
                mem: Some(MemInfo {
                    total: 1000,
                    used: 600,
                    free: 400,
                    reserved: 0,
                }),
                util: None,
                temp_c: None,
                power_mw: None,
                procs: vec![ps(11, 100), ps(12, 300), ps(20, 200)],
                error: None,
            }],
        }));
        s
    }

    #[test]
    fn a_jobs_ranks_fold_into_its_lead_and_sort_and_filter_apply_to_the_job() {
        let s = job_state();
        let jobs = jobs_on(&s, 0);
        assert_eq!(jobs.len(), 1);
        let pids = |rows: Vec<(&ProcState, &ProcGpu)>| -> Vec<u32> {
            rows.iter().map(|(p, _)| p.info.pid).collect()
        };
        let by_used = rows(&s, 0, Sort::default(), "");
        assert_eq!(pids(by_used.clone()), [12, 20, 11]);
        // Folded: the job sorts where its busiest rank does, drawn on its lead.
        assert_eq!(
            pids(group_jobs(&s, 0, by_used.clone(), &jobs, true)),
            [11, 20]
        );
        // Unfolded: its ranks together, in rank order.
        assert_eq!(pids(group_jobs(&s, 0, by_used, &jobs, false)), [11, 12, 20]);
        // A filter that one rank passes keeps the job.
        let f = rows(&s, 0, Sort::default(), "12");
        assert_eq!(pids(group_jobs(&s, 0, f, &jobs, true)), [11]);
        let none = rows(&s, 0, Sort::default(), "eval");
        assert_eq!(pids(group_jobs(&s, 0, none, &jobs, true)), [20]);
    }

    #[test]
    fn sort_keys_cycle_through_all_five_and_label_the_direction() {
        let mut k = SortKey::Used;
        let mut seen = vec![];
        for _ in 0..5 {
            seen.push(k.column());
            k = k.next();
        }
        assert_eq!(k, SortKey::Used);
        assert_eq!(seen, ["USED", "PEAK", "GROWTH", "PID", "COMMAND"]);
        let s = Sort {
            key: SortKey::Pid,
            desc: false,
        };
        assert_eq!(s.label(false), "PID▲");
        assert_eq!(s.label(true), "PID^");
    }
}
