//! Who a process is in a distributed job: its program (a `multiprocessing` child runs its
//! launcher's), its rank, and which job it belongs to; and the jobs themselves, grouped from
//! their ranks. Read from /proc (`ProcInfo`) and, where /proc is silent (a recording made
//! without it, another container), from the companion's hello.

use crate::model::label::{forkserver_program, is_mp_bootstrap, process_label};
use crate::model::sample::ProcInfo;
use crate::wire::Hello;

/// What the ranks of one job share, strongest first: torchrun's run id, the Slurm job (and
/// its `srun` step), the rendezvous address, the launcher that started them, and (for a
/// recording without the process tree) the same program with the same world size.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobKey {
    Run(String),
    /// `Slurm::job_name`: `12345`, `12345_7` (an array task), `12345.0` (a step).
    Slurm(String),
    Master(String),
    Launcher(u32),
    Alike {
        label: String,
        world_size: u32,
    },
}

/// A process's place in its program and job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// The command line of the program it runs: its own, or a `multiprocessing` child's
    /// launcher's. `None` when neither is known.
    pub program: Option<String>,
    /// The program's short name (`train.py`), as every output's `process` label.
    pub label: Option<String>,
    /// Its own command line is a `multiprocessing` bootstrap.
    pub mp_child: bool,
    pub key: Option<JobKey>,
}

impl Identity {
    pub fn of(info: &ProcInfo, hello: Option<&Hello>) -> Identity {
        let h = |f: fn(&Hello) -> Option<u32>| hello.and_then(f);
        let hs = |f: fn(&Hello) -> Option<&String>| hello.and_then(f).cloned();
        let own = info.cmdline.clone().or(hs(|h| h.cmdline.as_ref()));
        let mp_child = own.as_deref().is_some_and(is_mp_bootstrap);
        let program = if mp_child {
            info.program
                .clone()
                .or(hs(|h| h.program.as_ref()))
                .or_else(|| own.as_deref().and_then(forkserver_program))
        } else {
            own.clone()
        };
        let label = match &program {
            Some(p) => process_label(Some(p), info.name.as_deref()),
            None => process_label(own.as_deref(), info.name.as_deref()),
        };
        // Slurm's task ids only where no launcher set RANK: torchrun inside `srun` gives
        // its workers the srun task's PROCID, which is the node's, not the rank's.
        let slurm = info.slurm.as_ref();
        let rank = info.rank.or(h(|h| h.rank)).or(slurm.and_then(|s| s.rank()));
        let world_size = info
            .world_size
            .or(h(|h| h.world_size))
            .or(slurm.and_then(|s| s.world_size()));
        // torchrun's run id is "none" unless `--rdzv-id` is given: every job launched
        // without one would share it, so it names no job; the rendezvous address does.
        let run = info
            .run_id
            .clone()
            .or(hs(|h| h.run_id.as_ref()))
            .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("none"));
        let master = info.master.clone().or(hs(|h| h.master.as_ref()));
        // A Slurm job groups the processes that are ranks of something (two unrelated
        // programs one batch script started are two programs, not one job).
        let ranked = rank.is_some() || mp_child || world_size > Some(1);
        let key = if let Some(r) = run {
            Some(JobKey::Run(r))
        } else if let Some(s) = slurm.and_then(|s| s.job_name()).filter(|_| ranked) {
            Some(JobKey::Slurm(s))
        } else if let Some(m) = master {
            Some(JobKey::Master(m))
        } else if rank.is_some() || mp_child {
            // The launcher: a spawn child's parent, else the group torchrun's ranks share.
            match (info.ppid.filter(|&p| p > 1), info.pgid.filter(|&p| p > 1)) {
                (Some(p), _) if mp_child => Some(JobKey::Launcher(p)),
                (_, Some(g)) => Some(JobKey::Launcher(g)),
                (Some(p), None) => Some(JobKey::Launcher(p)),
                (None, None) => match (&label, world_size) {
                    (Some(l), Some(w)) if w > 1 && rank.is_some() => Some(JobKey::Alike {
                        label: l.clone(),
                        world_size: w,
                    }),
                    _ => None,
                },
            }
        } else {
            None
        };
        Identity {
            rank,
            local_rank: info
                .local_rank
                .or(h(|h| h.local_rank))
                .or(slurm.and_then(|s| s.local_rank())),
            world_size,
            program,
            label,
            mp_child,
            key,
        }
    }

    /// `[rank 1] ` where a rank is known, else nothing: the prefix every view puts before a
    /// process's name.
    pub fn rank_prefix(&self) -> String {
        self.rank
            .map_or_else(String::new, |r| format!("[rank {r}] "))
    }

    /// The label with its rank: `[rank 1] train.py`.
    pub fn ranked_label(&self) -> Option<String> {
        Some(format!("{}{}", self.rank_prefix(), self.label.as_deref()?))
    }
}

/// One rank of a job, as grouping found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub pid: u32,
    pub rank: Option<u32>,
}

/// The processes of one distributed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub key: JobKey,
    /// Short and unique among the jobs of a host: `train.py@127.0.0.1:29500`,
    /// `train.py@slurm:12345.0`. The `job` label of the exports.
    pub id: String,
    /// The program's label (`train.py`).
    pub name: String,
    /// `WORLD_SIZE`, when the ranks know it.
    pub world_size: Option<u32>,
    /// By rank (unknown ranks last), then PID.
    pub members: Vec<Member>,
}

impl Job {
    /// The member a folded job is selected and opened by: its lowest rank.
    pub fn lead(&self) -> u32 {
        self.members[0].pid
    }

    pub fn has(&self, pid: u32) -> bool {
        self.members.iter().any(|m| m.pid == pid)
    }

    pub fn rank_of(&self, pid: u32) -> Option<u32> {
        self.members.iter().find(|m| m.pid == pid)?.rank
    }
}

/// The jobs among these processes: those sharing a key, two or more of them, or one that
/// says it is one rank of several (`WORLD_SIZE` > 1: the others are elsewhere or gone).
pub fn group<'a>(who: impl IntoIterator<Item = (u32, &'a Identity)>) -> Vec<Job> {
    let mut by_key: std::collections::BTreeMap<&JobKey, Vec<(u32, &Identity)>> = Default::default();
    for (pid, id) in who {
        if let Some(k) = &id.key {
            by_key.entry(k).or_default().push((pid, id));
        }
    }
    // Ranks told apart only by being alike (a recording without the process tree): jobs
    // of one program started one after another are cut apart where a rank repeats or
    // the world is full, in PID order (a launcher starts its ranks in a row).
    let mut groups: Vec<(&JobKey, Vec<(u32, &Identity)>)> = Vec::new();
    for (key, mut ms) in by_key {
        if !matches!(key, JobKey::Alike { .. }) {
            groups.push((key, ms));
            continue;
        }
        ms.sort_by_key(|(pid, _)| *pid);
        let mut cur: Vec<(u32, &Identity)> = Vec::new();
        for m in ms {
            let full = cur.len() as u32 >= m.1.world_size.unwrap_or(u32::MAX);
            if full || cur.iter().any(|(_, i)| i.rank == m.1.rank) {
                groups.push((key, std::mem::take(&mut cur)));
            }
            cur.push(m);
        }
        groups.push((key, cur));
    }
    groups
        .into_iter()
        .filter(|(_, ms)| ms.len() >= 2 || ms.iter().any(|(_, i)| i.world_size > Some(1)))
        .map(|(key, mut ms)| {
            ms.sort_by_key(|(pid, i)| (i.rank.is_none(), i.rank, *pid));
            let name = ms
                .iter()
                .find_map(|(_, i)| i.label.clone())
                .unwrap_or_else(|| "job".into());
            let anchor = match key {
                JobKey::Run(r) => r.clone(),
                JobKey::Slurm(s) => format!("slurm:{s}"),
                JobKey::Master(m) => m.clone(),
                JobKey::Launcher(p) => p.to_string(),
                JobKey::Alike { .. } => ms.iter().map(|(p, _)| *p).min().unwrap_or(0).to_string(),
            };
            Job {
                key: key.clone(),
                id: format!("{name}@{anchor}"),
                name,
                world_size: ms.iter().filter_map(|(_, i)| i.world_size).max(),
                members: ms
                    .iter()
                    .map(|(pid, i)| Member {
                        pid: *pid,
                        rank: i.rank,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Lowest, median and highest of the ranks' memory: one number each for the job row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub min: u64,
    pub median: u64,
    pub max: u64,
}

pub fn spread(values: &[u64]) -> Option<Spread> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        return None;
    }
    // The lower middle of an even count: a value some rank has.
    Some(Spread {
        min: v[0],
        median: v[(n - 1) / 2],
        max: v[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAWN: &str = "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; \
        spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork";

    fn info(pid: u32, cmd: &str) -> ProcInfo {
        ProcInfo {
            pid,
            name: Some("python3".into()),
            cmdline: Some(cmd.into()),
            ..ProcInfo::default()
        }
    }

    #[test]
    fn a_spawn_child_is_named_by_its_launchers_script_and_rank() {
        let mut i = info(961, SPAWN);
        i.program = Some("/usr/bin/python3 /w/ddp_spawn.py --epochs 40".into());
        i.ppid = Some(959);
        i.pgid = Some(959);
        let hello = Hello {
            rank: Some(1),
            world_size: Some(2),
            ..Hello::default()
        };
        let who = Identity::of(&i, Some(&hello));
        assert!(who.mp_child);
        assert_eq!(who.label.as_deref(), Some("ddp_spawn.py"));
        assert_eq!(who.ranked_label().as_deref(), Some("[rank 1] ddp_spawn.py"));
        assert_eq!(who.key, Some(JobKey::Launcher(959)));
        // Without /proc's tree, the companion's word for the program.
        let bare = info(961, SPAWN);
        let told = Hello {
            program: Some("python3 ddp_spawn.py".into()),
            ..Hello::default()
        };
        let who = Identity::of(&bare, Some(&told));
        assert_eq!(who.label.as_deref(), Some("ddp_spawn.py"));
        // Neither: the interpreter, as before.
        assert_eq!(Identity::of(&bare, None).label.as_deref(), Some("python3"));
    }

    #[test]
    fn torchrun_ranks_are_named_by_the_training_script() {
        let mut i = info(3001, "/usr/bin/python3 -u train.py --bs 4");
        i.rank = Some(3);
        i.world_size = Some(8);
        i.master = Some("10.0.0.1:29500".into());
        i.ppid = Some(3000);
        let who = Identity::of(&i, None);
        assert_eq!(who.ranked_label().as_deref(), Some("[rank 3] train.py"));
        assert_eq!(who.key, Some(JobKey::Master("10.0.0.1:29500".into())));
        i.run_id = Some("none".into());
        assert_eq!(
            Identity::of(&i, None).key,
            Some(JobKey::Master("10.0.0.1:29500".into())),
            "torchrun's default run id names no job"
        );
        i.run_id = Some("bert-7".into());
        assert_eq!(
            Identity::of(&i, None).key,
            Some(JobKey::Run("bert-7".into()))
        );
        // A plain process is no job and has no rank.
        let plain = Identity::of(&info(5, "python3 eval.py"), None);
        assert_eq!((plain.rank_prefix(), plain.key), (String::new(), None));
    }

    #[test]
    fn ranks_sharing_a_launcher_are_one_job_and_strangers_are_not() {
        let mk = |pid: u32, ppid: u32, rank: Option<u32>| {
            let mut i = info(pid, SPAWN);
            i.program = Some("python3 ddp.py".into());
            i.ppid = Some(ppid);
            i.rank = rank;
            i.world_size = rank.map(|_| 2);
            Identity::of(&i, None)
        };
        let ids = [
            (962, mk(962, 959, Some(1))),
            (960, mk(960, 959, Some(0))),
            (971, mk(971, 970, None)),
            (972, mk(972, 970, None)),
            (980, Identity::of(&info(980, "python3 other.py"), None)),
        ];
        let jobs = group(ids.iter().map(|(p, i)| (*p, i)));
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        assert_eq!(jobs[0].id, "ddp.py@959");
        assert_eq!(jobs[0].world_size, Some(2));
        assert_eq!(
            jobs[0].members,
            [
                Member {
                    pid: 960,
                    rank: Some(0)
                },
                Member {
                    pid: 962,
                    rank: Some(1)
                }
            ]
        );
        assert_eq!(jobs[0].lead(), 960);
        assert_eq!(jobs[1].members.len(), 2);
        assert!(!jobs.iter().any(|j| j.has(980)));
    }

    #[test]
    fn one_rank_of_many_is_a_job_and_a_lone_process_is_not() {
        let mut i = info(7, "python3 train.py");
        i.rank = Some(2);
        i.world_size = Some(8);
        i.pgid = Some(6);
        let one = Identity::of(&i, None);
        let jobs = group([(7, &one)]);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].world_size, Some(8));
        i.world_size = Some(1);
        let single = Identity::of(&i, None);
        assert!(group([(7, &single)]).is_empty());
    }

    #[test]
    fn a_recording_without_the_tree_groups_ranks_of_one_program_and_size() {
        let mk = |pid, rank| {
            let mut i = info(pid, "python3 train.py");
            i.rank = Some(rank);
            i.world_size = Some(2);
            Identity::of(&i, None)
        };
        let (a, b) = (mk(1, 0), mk(2, 1));
        let jobs = group([(1, &a), (2, &b)]);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, "train.py@1");
        // Two such jobs one after the other (the H200 recording's mp.spawn jobs: PIDs
        // 591, 592 and 634, 635) are two jobs, not one with two rank 0s.
        let (c, d) = (mk(634, 0), mk(635, 1));
        let jobs = group([(635, &d), (1, &a), (634, &c), (2, &b)]);
        let members: Vec<Vec<u32>> = jobs
            .iter()
            .map(|j| j.members.iter().map(|m| m.pid).collect())
            .collect();
        assert_eq!(members, [vec![1, 2], vec![634, 635]]);
        assert_eq!(jobs[1].id, "train.py@634");
    }

    fn slurm_rank(pid: u32, job: &str, step: &str, procid: u32, tasks: u32) -> ProcInfo {
        let mut i = info(pid, "python3 train.py --bs 4");
        let mut s = crate::model::placement::Slurm::default();
        for v in [
            format!("SLURM_JOB_ID={job}"),
            format!("SLURM_STEP_ID={step}"),
            format!("SLURM_PROCID={procid}"),
            format!("SLURM_LOCALID={}", procid % 4),
            format!("SLURM_STEP_NUM_TASKS={tasks}"),
            "SLURM_JOB_NODELIST=gpu[01-02]".to_string(),
        ] {
            s.var(&v);
        }
        i.slurm = s.finish();
        // srun's tasks on one node are children of its step daemon, each its own group.
        i.ppid = Some(900);
        i.pgid = Some(pid);
        i
    }

    #[test]
    fn the_tasks_of_one_srun_step_are_one_job_ranked_by_slurm() {
        let a = Identity::of(&slurm_rank(1001, "4711", "0", 4, 8), None);
        let b = Identity::of(&slurm_rank(1002, "4711", "0", 5, 8), None);
        assert_eq!(
            (a.rank, a.local_rank, a.world_size),
            (Some(4), Some(0), Some(8))
        );
        assert_eq!(a.key, Some(JobKey::Slurm("4711.0".into())));
        // Another job's step, and a later step of the same job: jobs of their own.
        let other = Identity::of(&slurm_rank(1003, "4712", "0", 0, 8), None);
        let later = Identity::of(&slurm_rank(1004, "4711", "1", 0, 8), None);
        let jobs = group([(1001, &a), (1002, &b), (1003, &other), (1004, &later)]);
        let ids: Vec<(&str, usize)> = jobs
            .iter()
            .map(|j| (j.id.as_str(), j.members.len()))
            .collect();
        assert_eq!(
            ids,
            [
                ("train.py@slurm:4711.0", 2),
                ("train.py@slurm:4711.1", 1),
                ("train.py@slurm:4712.0", 1)
            ]
        );
        assert_eq!(jobs[0].world_size, Some(8));
        assert_eq!(jobs[0].members[0].rank, Some(4));
    }

    #[test]
    fn a_launchers_rank_wins_over_the_slurm_task_and_an_array_task_is_its_own_job() {
        // torchrun inside srun: the workers inherit the srun task's PROCID (the node).
        let mut i = slurm_rank(2001, "4711", "0", 1, 2);
        i.rank = Some(13);
        i.local_rank = Some(5);
        i.world_size = Some(16);
        i.master = Some("gpu01:29500".into());
        let w = Identity::of(&i, None);
        assert_eq!(
            (w.rank, w.local_rank, w.world_size),
            (Some(13), Some(5), Some(16))
        );
        assert_eq!(
            w.key,
            Some(JobKey::Slurm("4711.0".into())),
            "Slurm before the rendezvous"
        );
        // An explicit rendezvous id is the user's name for the job.
        i.run_id = Some("bert-7".into());
        assert_eq!(
            Identity::of(&i, None).key,
            Some(JobKey::Run("bert-7".into()))
        );
        // Two tasks of one array, each with two ranks: two jobs named as squeue names them.
        let task = |pid, job: &str, t: &str, procid| {
            let mut i = slurm_rank(pid, job, "0", procid, 2);
            let s = i.slurm.as_mut().expect("slurm");
            s.array_job_id = Some("5000".into());
            s.array_task_id = Some(t.into());
            Identity::of(&i, None)
        };
        let ids = [
            (3001, task(3001, "5001", "1", 0)),
            (3002, task(3002, "5001", "1", 1)),
            (3003, task(3003, "5002", "2", 0)),
            (3004, task(3004, "5002", "2", 1)),
        ];
        let jobs = group(ids.iter().map(|(p, i)| (*p, i)));
        let names: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(
            names,
            ["train.py@slurm:5000_1.0", "train.py@slurm:5000_2.0"]
        );
    }

    #[test]
    fn unranked_processes_of_one_slurm_job_are_not_a_job() {
        // A batch script that starts two programs: same job id, no step, no rank.
        let mk = |pid, cmd: &str| {
            let mut i = info(pid, cmd);
            let mut s = crate::model::placement::Slurm::default();
            s.var("SLURM_JOB_ID=4711");
            s.var("SLURM_PROCID=0");
            i.slurm = s.finish();
            Identity::of(&i, None)
        };
        let (a, b) = (mk(1, "python3 a.py"), mk(2, "python3 b.py"));
        assert_eq!((a.rank, a.key.clone()), (None, None));
        assert!(group([(1, &a), (2, &b)]).is_empty());
    }

    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(spread(&[]), None);
        let s = spread(&[30, 10, 20, 40]).expect("spread");
        assert_eq!((s.min, s.median, s.max), (10, 20, 40));
        let s = spread(&[5]).expect("spread");
        assert_eq!((s.min, s.median, s.max), (5, 5, 5));
    }
}
