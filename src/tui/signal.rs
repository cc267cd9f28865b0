//! Sending a signal to a monitored process (`x`/F9): whether the user may, and doing it.
//! libc directly: two system calls do not justify a dependency.

/// What /proc says about a process now: the prompt names this, never what a companion
/// said about itself (a peer may lie, or its pid may have been reused since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// `/proc/PID/cmdline`, arguments joined by spaces (the comm name if empty).
    pub cmdline: String,
    /// Start time in clock ticks: the signal goes only to the process that was named.
    pub started: u64,
}

/// Why a process cannot be signalled, in words for the status line; what it is when it
/// can. `kill(pid, 0)` asks the kernel the very question (ownership, capabilities),
/// without sending anything.
pub fn may_signal(pid: u32) -> Result<Live, String> {
    permitted(pid)?;
    let started = crate::source::procfs::start_ticks(pid)
        .ok_or_else(|| format!("PID {pid} no longer exists"))?;
    let info = crate::source::procfs::read(pid);
    let cmdline = info.cmdline.or(info.name).unwrap_or_default();
    Ok(Live { cmdline, started })
}

fn permitted(pid: u32) -> Result<(), String> {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return Err(format!("PID {pid} is out of range"));
    };
    if p <= 1 || pid == std::process::id() {
        return Err(format!("PID {pid} is not a process gpumon will signal"));
    }
    // SAFETY: kill with signal 0 only checks existence and permission.
    if unsafe { libc::kill(p, 0) } == 0 {
        return Ok(());
    }
    Err(match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM) => format!("PID {pid} belongs to another user: not allowed to signal it"),
        Some(libc::ESRCH) => format!("PID {pid} no longer exists"),
        _ => format!("PID {pid}: {}", std::io::Error::last_os_error()),
    })
}

/// Send `sig` (SIGTERM or SIGKILL) to `pid` if it is still the process that started at
/// `started` (the one the prompt named); the result as a sentence for the status line.
pub fn send(pid: u32, sig: i32, started: u64) -> Result<String, String> {
    permitted(pid)?;
    if crate::source::procfs::start_ticks(pid) != Some(started) {
        return Err(format!(
            "PID {pid} is no longer the process that was named: {} not sent",
            name(sig)
        ));
    }
    let p = pid as libc::pid_t;
    // SAFETY: a plain kill(2) on a PID checked above; no memory is involved.
    if unsafe { libc::kill(p, sig) } == 0 {
        Ok(format!("{} sent to PID {pid}", name(sig)))
    } else {
        Err(format!(
            "{} to PID {pid} failed: {}",
            name(sig),
            std::io::Error::last_os_error()
        ))
    }
}

/// `SIGTERM`/`SIGKILL`, for prompts and results.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGKILL => "SIGKILL",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_children_may_be_signalled_init_and_the_dead_may_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        // spawn returns once exec has begun; its arguments are set a moment later.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let live = may_signal(child.id()).expect("may signal");
        assert_eq!(live.cmdline, "sleep 30");
        assert!(
            send(child.id(), libc::SIGTERM, live.started + 1).is_err(),
            "a process started at another time is another process"
        );
        assert_eq!(
            send(child.id(), libc::SIGTERM, live.started),
            Ok(format!("SIGTERM sent to PID {}", child.id()))
        );
        let status = child.wait().expect("wait");
        assert!(!status.success(), "sleep was ended by the signal");
        assert!(may_signal(1).is_err());
        assert!(may_signal(child.id()).is_err(), "reaped child is gone");
    }
}
