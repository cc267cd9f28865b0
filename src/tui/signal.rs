//! Sending a signal to a monitored process (`k`/F9): whether the user may, and doing it.
//! libc directly: two system calls do not justify a dependency.

/// Why a process cannot be signalled, in words for the status line; `Ok` when it can.
/// `kill(pid, 0)` asks the kernel the very question (ownership, capabilities), without
/// sending anything.
pub(crate) fn may_signal(pid: u32) -> Result<(), String> {
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

/// Send `sig` (SIGTERM or SIGKILL) to `pid`; the result as a sentence for the status line.
pub(crate) fn send(pid: u32, sig: i32) -> Result<String, String> {
    may_signal(pid)?;
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
pub(crate) fn name(sig: i32) -> &'static str {
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
        assert_eq!(may_signal(child.id()), Ok(()));
        assert_eq!(
            send(child.id(), libc::SIGTERM),
            Ok(format!("SIGTERM sent to PID {}", child.id()))
        );
        let status = child.wait().expect("wait");
        assert!(!status.success(), "sleep was ended by the signal");
        assert!(may_signal(1).is_err());
        assert!(may_signal(child.id()).is_err(), "reaped child is gone");
    }
}
