//! How a process ended, or is ending, in one word every view shares. The model marks an
//! exit only after a grace (NVML misses a live process now and then, and alerts end at the
//! exit); in those seconds a process its OOM took down would read `gone` in its row while
//! the alert beside it already says `OOM`, and the report, reading the whole run, `OOM`.

use crate::model::exit::{Exit, ExitCause};
use crate::model::state::{ProcState, State};

impl State {
    /// The process's exit once marked; before that, once NVML has stopped listing it and
    /// its companion's last word was an OOM no completed epoch followed, that OOM, as of
    /// its last sighting. `None` while it runs, or is only unlisted for no known cause.
    pub fn ending(&self, p: &ProcState) -> Option<Exit> {
        if p.exit.is_some() {
            return p.exit;
        }
        if p.unlisted == 0 {
            return None;
        }
        let c = self.companions.latest(p.info.pid)?;
        (ExitCause::from_companion(c) == ExitCause::Oom).then_some(Exit {
            at: p.last_seen,
            cause: ExitCause::Oom,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::model::exit::ExitCause;
    use crate::model::frame::{CompanionFrame, Frame, Header};
    use crate::model::sample::{GpuInfo, GpuSample, ProcKind, ProcSample, Tick};
    use crate::model::state::State;
    use crate::wire::{EpochRecord, FrameworkEvent, Message};

    fn tick(t: i64, pids: &[u32]) -> Frame {
        Frame::Tick(Tick {
            t,
            gpus: vec![GpuSample {
                index: 0,
                mem: None,
                util: None,
                temp_c: None,
                power_mw: None,
                procs: pids
                    .iter()
                    .map(|&pid| ProcSample {
                        pid,
                        kind: ProcKind::Compute,
                        used: Some(10),
                        ..ProcSample::default()
                    })
                    .collect(),
                error: None,
            }],
        })
    }

    fn said(t: i64, msg: Message) -> Frame {
        Frame::Companion(CompanionFrame { t, pid: 3, msg })
    }

    fn run(last: Message) -> State {
        let mut s = State::default();
        s.apply(&Frame::Header(Header::bare(vec![GpuInfo {
            index: 0,
            name: "g".into(),
            uuid: "GPU-0".into(),
            pci_bus_id: "0".into(),
            memory_total: 100,
            mig_uuids: vec![],
        }])));
        s.apply(&tick(1_000, &[3]));
        s.apply(&said(
            1_100,
            Message::Epoch(EpochRecord {
                epoch: 0,
                ..EpochRecord::default()
            }),
        ));
        s.apply(&said(1_500, last));
        s
    }

    fn oom() -> Message {
        Message::Event(FrameworkEvent {
            kind: "oom".into(),
            requested: Some(64),
            ..FrameworkEvent::default()
        })
    }

    #[test]
    fn an_unlisted_process_whose_companion_last_said_oom_is_ending_by_it() {
        let mut s = run(oom());
        let ending = |s: &State| s.ending(&s.procs[&3]).map(|e| (e.at, e.cause));
        assert_eq!(ending(&s), None, "still listed: running");
        s.apply(&tick(2_000, &[3]));
        assert_eq!(ending(&s), None, "listed after its OOM: it caught it");
        s.apply(&tick(3_000, &[]));
        assert!(s.procs[&3].exit.is_none(), "within the grace");
        assert_eq!(ending(&s), Some((2_000, ExitCause::Oom)));
    }

    #[test]
    fn an_unlisted_process_without_an_oom_is_not_ending_yet() {
        let mut s = run(Message::Epoch(EpochRecord {
            epoch: 1,
            ..EpochRecord::default()
        }));
        s.apply(&tick(2_000, &[]));
        assert_eq!(s.ending(&s.procs[&3]), None);
    }
}
