//! A job's line on screen, as numbers: how many of its ranks are seen of `WORLD_SIZE`, on
//! which GPUs, how their memory spreads (min / median / max), and which rank ended first
//! and how (an OOM, a kill), with how many have ended.

use crate::model::exit::ExitCause;
use crate::model::job::{Job, Spread, spread};
use crate::model::state::State;

/// The first rank that ended, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub pid: u32,
    pub rank: Option<u32>,
    pub cause: ExitCause,
    /// The epoch it was in, from its companion.
    pub epoch: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    /// Ranks seen (running or ended and still listed).
    pub found: usize,
    pub world_size: Option<u32>,
    /// NVML indices of the cards its ranks are on.
    pub gpus: Vec<u32>,
    /// NVML usage of the running ranks (each summed over its cards).
    pub spread: Option<Spread>,
    pub ended: usize,
    /// An OOM or a kill first, else the first to end.
    pub first_end: Option<Ended>,
}

pub fn status(state: &State, job: &Job) -> JobStatus {
    let mut gpus = Vec::new();
    let mut used = Vec::new();
    let mut ends = Vec::new();
    for m in &job.members {
        let Some(p) = state.procs.get(&m.pid) else {
            continue;
        };
        gpus.extend(p.gpus.keys().copied());
        match p.exit {
            None => {
                let u: Option<u64> = p.gpus.values().map(|g| g.last_used).sum();
                used.extend(u);
            }
            Some(e) => {
                let c = &state.companions;
                let epoch = c.get(m.pid).or(c.ended.get(&m.pid)).and_then(|a| {
                    a.devices
                        .values()
                        .filter_map(|d| d.last.as_ref()?.epoch)
                        .max()
                });
                ends.push((e, m, epoch));
            }
        }
    }
    gpus.sort_unstable();
    gpus.dedup();
    // The rank that took the job down: a failure before a plain exit, then the earliest.
    let first_end = ends
        .iter()
        .min_by_key(|(e, _, _)| (e.cause == ExitCause::Exited, e.at))
        .map(|(e, m, epoch)| Ended {
            pid: m.pid,
            rank: m.rank,
            cause: e.cause,
            epoch: *epoch,
        });
    JobStatus {
        found: job.members.len(),
        world_size: job.world_size,
        gpus,
        spread: spread(&used),
        ended: ends.len(),
        first_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::Frame;
    use crate::model::sample::{GpuSample, MemInfo, ProcInfo, ProcSample, Tick};

    fn tick(t: i64, procs: &[(u32, u64)]) -> Frame {
        Frame::Tick(Tick {
            t,
            gpus: vec![GpuSample {
                index: 0,
                mem: Some(MemInfo {
                    total: 100 << 30,
                    used: 10 << 30,
                    free: 90 << 30,
                    reserved: 0,
                }),
                util: None,
                temp_c: None,
                power_mw: None,
                procs: procs
                    .iter()
                    .map(|&(pid, used)| ProcSample {
                        pid,
                        kind: Default::default(),
                        used: Some(used),
                        ..ProcSample::default()
                    })
                    .collect(),
                error: None,
            }],
        })
    }

    #[test]
    fn a_job_counts_its_ranks_spread_and_the_first_to_end() {
        let mut s = State::default();
        let infos: Vec<ProcInfo> = (0..3)
            .map(|r| ProcInfo {
                pid: 100 + r,
                cmdline: Some("python3 -u train.py".into()),
                rank: Some(r),
                world_size: Some(4),
                master: Some("127.0.0.1:29500".into()),
                ..ProcInfo::default()
            })
            .collect();
        s.apply(&Frame::Procs { t: 0, procs: infos });
        let m = 1 << 20;
        s.apply(&tick(0, &[(100, 900 * m), (101, 400 * m), (102, 380 * m)]));
        let job = s.job_of(101).expect("a job");
        let st = status(&s, &job);
        assert_eq!((st.found, st.world_size, st.ended), (3, Some(4), 0));
        assert_eq!(st.gpus, [0]);
        let sp = st.spread.expect("spread");
        assert_eq!((sp.min, sp.median, sp.max), (380 * m, 400 * m, 900 * m));
        // Rank 2 goes; long enough later it is marked as exited.
        for t in 1..=40 {
            s.apply(&tick(t * 1000, &[(100, 900 * m), (101, 400 * m)]));
        }
        let st = status(&s, &s.job_of(100).expect("job"));
        assert_eq!(st.ended, 1);
        let e = st.first_end.expect("ended");
        assert_eq!((e.pid, e.rank, e.cause), (102, Some(2), ExitCause::Exited));
        assert_eq!(st.spread.map(|s| s.max), Some(900 * m));
    }
}
