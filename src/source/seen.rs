//! The processes the sampler has read /proc for, and whether the pid of each still names
//! the same process (a reused pid must have its name, user and command read again).
//!
//! Asking `/proc/PID/stat` for the start time of every listed process once a second is five
//! system calls and the kernel's formatting of the whole stat line each: locally two thirds
//! of the sampler thread's own work at 1 s. A pidfd (Linux 5.3+) held for each
//! process becomes readable when that process exits, so one `poll` over all of them says
//! which may have been replaced; only those are asked for their start time. Where a pidfd
//! cannot be had (an older kernel, a seccomp filter, a process of another pid namespace)
//! the start time is asked every time, as before.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::model::sample::ProcInfo;
use crate::source::procfs;

/// Most pidfds held at once (a quarter of the usual 1024 open files); processes past this
/// many are checked by start time.
const MAX_FDS: usize = 256;

struct Entry {
    start: Option<u64>,
    fd: Option<OwnedFd>,
}

/// The pids read so far, with how to tell their process was replaced.
#[derive(Default)]
pub(crate) struct Seen {
    by_pid: HashMap<u32, Entry>,
}

impl Seen {
    /// The listed pids' /proc facts that are new: a pid not seen before, or (when `check`)
    /// one whose process was replaced since it was read. Forgets pids no longer listed.
    pub(crate) fn fresh(&mut self, listed: &[u32], check: bool) -> Vec<ProcInfo> {
        let exited = if check { self.exited() } else { Vec::new() };
        let mut out = Vec::new();
        for &pid in listed {
            if let Some(e) = self.by_pid.get(&pid) {
                let same = !check || (e.fd.is_some() && !exited.contains(&pid));
                if same {
                    continue;
                }
            }
            let start = procfs::start_ticks(pid);
            if self.by_pid.get(&pid).map(|e| e.start) == Some(start) {
                continue;
            }
            self.by_pid.remove(&pid);
            let held = self.by_pid.values().filter(|e| e.fd.is_some()).count();
            let fd = (held < MAX_FDS).then(|| pidfd_open(pid)).flatten();
            self.by_pid.insert(pid, Entry { start, fd });
            out.push(procfs::read(pid));
        }
        self.by_pid.retain(|pid, _| listed.contains(pid));
        out
    }

    /// The pids whose held process has exited: one `poll` of every pidfd, never waiting.
    fn exited(&self) -> Vec<u32> {
        let (pids, mut polls): (Vec<u32>, Vec<libc::pollfd>) = (self.by_pid.iter())
            .filter_map(|(pid, e)| e.fd.as_ref().map(|fd| (*pid, fd)))
            .map(|(pid, fd)| {
                let p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                (pid, p)
            })
            .unzip();
        if polls.is_empty() {
            return Vec::new();
        }
        // SAFETY: `polls` holds `polls.len()` initialised entries, each an open fd of ours.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, 0) };
        if n < 0 {
            // Cannot tell: treat every one as possibly replaced (their start time is read).
            return pids;
        }
        (pids.into_iter().zip(&polls))
            .filter(|(_, p)| p.revents != 0)
            .map(|(pid, _)| pid)
            .collect()
    }
}

/// A pidfd for `pid`, or `None` where the kernel or a filter does not give one.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the fd was just returned to us and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_pid_is_read_once_while_its_process_lives_and_forgotten_when_unlisted() {
        let me = std::process::id();
        let mut seen = Seen::default();
        let first = seen.fresh(&[me], true);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].pid, me);
        assert!(
            seen.fresh(&[me], true).is_empty(),
            "the same process: nothing new"
        );
        assert!(seen.fresh(&[me], false).is_empty());
        assert!(seen.fresh(&[], true).is_empty());
        assert!(
            seen.by_pid.is_empty(),
            "unlisted: forgotten (and its pidfd closed)"
        );
        assert_eq!(seen.fresh(&[me], true).len(), 1, "listed again: read again");
    }

    #[test]
    fn a_process_that_exited_is_found_by_its_pidfd_and_its_pid_asked_again() {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let mut seen = Seen::default();
        assert_eq!(seen.fresh(&[pid], true).len(), 1);
        let held = seen.by_pid[&pid].fd.is_some();
        assert!(seen.exited().is_empty(), "alive: its pidfd is not readable");
        child.kill().expect("kill");
        child.wait().expect("reap");
        if held {
            assert_eq!(seen.exited(), vec![pid], "exited: its pidfd is readable");
        }
        // The pid now names no process: its start time changed (to none), so it is read
        // again, and from then on asked by start time (no pidfd for a dead pid).
        assert_eq!(seen.fresh(&[pid], true).len(), 1);
        assert!(seen.by_pid[&pid].fd.is_none());
        assert!(
            seen.fresh(&[pid], true).is_empty(),
            "still no process: nothing new"
        );
    }
}
