//! How a process ended, as far as gpumon can tell: NVML stopped listing it and its
//! companion (if it had one) went away. The cause comes from the companion's last words:
//! an OOM it reported after its last completed epoch, a goodbye (a clean stop), or
//! neither (the connection just dropped: killed by a signal, or crashed).

use crate::model::allocator::ProcAlloc;
use crate::model::time::Ts;

/// NVML can miss a live process for a tick or two; unlisted longer than this (and no
/// live companion) is an exit. The alert rules read the exit the model marks.
pub const EXIT_GRACE_MS: i64 = 3_000;

/// ...or unlisted on this many ticks in a row, at least `EXIT_GRACE_MIN_MS` long: at a
/// sub-second interval three missed readings are an exit well before 3 s, so a recording
/// that ends 1.5 s after a process did shows it `exited`, its alerts past (the demo's PID 600
/// once stayed `gone`, its grab-all alert still active, at the end of the recording).
pub const EXIT_GRACE_TICKS: u32 = 3;
pub const EXIT_GRACE_MIN_MS: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    /// Ended; nothing says why (no companion, or it said goodbye).
    Exited,
    /// Its last event was an out-of-memory error no completed epoch followed.
    Oom,
    /// Its companion's connection dropped without a goodbye: a signal (SIGKILL, SIGTERM,
    /// the kernel's OOM killer) or a crash.
    Killed,
}

impl ExitCause {
    /// The word a process row shows in place of its usage.
    pub fn label(self) -> &'static str {
        match self {
            ExitCause::Exited => "exited",
            ExitCause::Oom => "OOM",
            ExitCause::Killed => "killed",
        }
    }

    /// What an ended companion tells about its process's end.
    pub fn from_companion(p: &ProcAlloc) -> ExitCause {
        let last_epoch = p
            .devices
            .values()
            .filter_map(|d| d.epochs.back().and_then(|e| e.t))
            .max();
        let last_oom = p
            .devices
            .values()
            .filter_map(|d| d.ooms().last().and_then(|e| e.t))
            .max();
        match (last_oom, last_epoch) {
            (Some(oom), Some(ep)) if oom > ep => ExitCause::Oom,
            (Some(_), None) => ExitCause::Oom,
            _ if p.bye.is_some() => ExitCause::Exited,
            _ => ExitCause::Killed,
        }
    }
}

/// When and how a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The later of NVML's last sighting and the companion's disconnect.
    pub at: Ts,
    pub cause: ExitCause,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::allocator::Companions;
    use crate::model::frame::CompanionFrame;
    use crate::wire::{Bye, EpochRecord, FrameworkEvent, Message};

    fn ended(msgs: Vec<Message>) -> ExitCause {
        let mut c = Companions::default();
        for (i, msg) in msgs.into_iter().enumerate() {
            let t = 1_000 * (i as i64 + 1);
            c.apply(&CompanionFrame { t, pid: 4, msg });
        }
        let end = Message::Disconnected(crate::wire::Disconnected::default());
        c.apply(&CompanionFrame {
            t: 99_000,
            pid: 4,
            msg: end,
        });
        ExitCause::from_companion(c.latest(4).expect("kept"))
    }

    fn epoch(n: u64) -> Message {
        Message::Epoch(EpochRecord {
            epoch: n,
            ..EpochRecord::default()
        })
    }

    fn oom() -> Message {
        Message::Event(FrameworkEvent {
            kind: "oom".into(),
            requested: Some(64 << 20),
            ..FrameworkEvent::default()
        })
    }

    fn bye() -> Message {
        Message::Bye(Bye {
            t: None,
            reason: Some("stop".into()),
        })
    }

    #[test]
    fn the_cause_is_the_companions_last_word() {
        assert_eq!(ended(vec![epoch(0), oom(), bye()]), ExitCause::Oom);
        assert_eq!(ended(vec![oom()]), ExitCause::Oom);
        // An OOM the program caught and trained on after: not what ended it.
        assert_eq!(ended(vec![oom(), epoch(1), bye()]), ExitCause::Exited);
        assert_eq!(ended(vec![epoch(0), bye()]), ExitCause::Exited);
        assert_eq!(ended(vec![epoch(0)]), ExitCause::Killed);
    }
}
