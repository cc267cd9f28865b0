//! SIGQUIT and SIGTSTP sent with `kill` give the terminal back:
//! before, the alternate screen stayed on and the cursor hidden. Runs the real
//! TUI in a private tmux server; skipped where tmux is missing.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux(String);

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn alternate_on(&self) -> bool {
        self.cmd(&["display-message", "-p", "-t", "s", "#{alternate_on}"])
            .trim()
            == "1"
    }

    fn wait(&self, what: &str, pred: impl Fn(&Tmux) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pred(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.cmd(&["kill-server"]);
    }
}

fn gpumon_pid(t: &Tmux) -> i32 {
    let shell: i32 = t
        .cmd(&["display-message", "-p", "-t", "s", "#{pane_pid}"])
        .trim()
        .parse()
        .expect("pane pid");
    let o = Command::new("pgrep")
        .args(["-P", &shell.to_string(), "-x", "gpumon"])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(shell)
}

fn start(name: &str) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: no tmux");
        return None;
    }
    let t = Tmux(format!("gpumon-sig-{name}-{}", std::process::id()));
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/h200_torch_companion.jsonl"
    );
    let cmd = format!(
        "{} replay {fixture}; sleep 30",
        env!("CARGO_BIN_EXE_gpumon")
    );
    t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "s",
        "-x",
        "100",
        "-y",
        "30",
        &cmd,
    ]);
    t.wait("the TUI", |t| {
        t.alternate_on() && t.cmd(&["capture-pane", "-p", "-t", "s"]).contains("GPU 0")
    });
    Some(t)
}

#[test]
fn sigquit_restores_the_terminal() {
    let Some(t) = start("quit") else { return };
    // SAFETY: kill with a pid we just looked up.
    unsafe { libc::kill(gpumon_pid(&t), libc::SIGQUIT) };
    t.wait("the alternate screen to end", |t| !t.alternate_on());
    assert!(
        t.cmd(&["capture-pane", "-p", "-t", "s"])
            .contains("stopped by SIGQUIT")
    );
}

#[test]
fn sigtstp_gives_the_terminal_back_and_sigcont_takes_it_again() {
    let Some(t) = start("tstp") else { return };
    let pid = gpumon_pid(&t);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTSTP) };
    t.wait("the alternate screen to end", |t| !t.alternate_on());
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    t.wait("the TUI to come back, redrawn", |t| {
        t.alternate_on() && t.cmd(&["capture-pane", "-p", "-t", "s"]).contains("GPU 0")
    });
}
