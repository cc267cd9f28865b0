//! End to end in a real terminal: tmux runs `gpumon replay` at 80x24, the test sends keys
//! and reads the pane. Requires tmux (CI installs it; GPUMON_REQUIRE_TMUX=1 makes its
//! absence a failure instead of a skip).

use crate::support;

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub(crate) struct Session(pub(crate) String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

pub(crate) fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("GPUMON_REQUIRE_TMUX").is_some() {
        panic!("tmux is required (GPUMON_REQUIRE_TMUX is set) but not installed");
    }
    ok
}

pub(crate) fn pane(s: &Session) -> String {
    tmux(&["capture-pane", "-p", "-t", &s.0])
}

pub(crate) fn wait_for(s: &Session, what: &str, secs: u64) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let p = pane(s);
        if p.contains(what) || Instant::now() > end {
            return p;
        }
        sleep(Duration::from_millis(100));
    }
}

pub(crate) fn keys(s: &Session, k: &[&str]) {
    let mut args = vec!["send-keys", "-t", s.0.as_str()];
    args.extend_from_slice(k);
    tmux(&args);
    sleep(Duration::from_millis(300));
}

/// Types `text` as it is (no key names), then waits as `keys` does.
pub(crate) fn literal(s: &Session, text: &str) {
    tmux(&["send-keys", "-t", s.0.as_str(), "-l", text]);
    std::thread::sleep(Duration::from_millis(300));
}

/// An 80x24 tmux session running `script(gpumon binary, fixture recording)` in sh.
fn start(tag: &str, script: impl Fn(&str, &str) -> String) -> Session {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let fixture = support::fixture("h200_torch_grow_shrink.jsonl");
    let cmd = script(&bin.display().to_string(), &fixture.display().to_string());
    start_cmd(tag, 80, 24, &cmd)
}

pub(crate) fn start_cmd(tag: &str, w: u16, h: u16, cmd: &str) -> Session {
    let name = format!("gpumon-{tag}-{}", std::process::id());
    let (w, h) = (w.to_string(), h.to_string());
    tmux(&["new-session", "-d", "-s", &name, "-x", &w, "-y", &h, cmd]);
    Session(name)
}

/// `gpumon replay FILE ARGS` (FILE relative to the repository) in an 80x24 session.
fn replay(tag: &str, file: &str, args: &str) -> Session {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {} {args}; sleep 60",
        bin.display(),
        path.display()
    );
    start_cmd(tag, 80, 24, &cmd)
}

/// A child process with a real companion (python, fake torch) reporting into a private
/// socket directory `DIR/sock`; returns once it is ready. The directory lives as long as
/// the returned guard.
fn companion(epochs: u32) -> (tempfile::TempDir, std::process::Child) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("sock");
    std::fs::create_dir(&sock).expect("mkdir");
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut program = Command::new("python3")
        .arg(format!("{root}/python/tests/fake_torch_program.py"))
        .arg(epochs.to_string())
        .env("GPUMON_DIR", &sock)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the companion");
    let mut line = String::new();
    let out = program.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("ready");
    assert!(line.starts_with("ready"), "{line}");
    (dir, program)
}

/// The text of the rows drawn in reverse video (the selection), from `capture-pane -e`.
pub(crate) fn reversed_rows(s: &Session) -> Vec<String> {
    let raw = tmux(&["capture-pane", "-p", "-e", "-t", &s.0]);
    let mut out = Vec::new();
    for line in raw.lines() {
        let (mut text, mut reversed, mut any) = (String::new(), false, false);
        let mut rest = line;
        while let Some(i) = rest.find("\x1b[") {
            if reversed {
                text.push_str(&rest[..i]);
            }
            let after = &rest[i + 2..];
            let Some(end) = after.find('m') else { break };
            let params: Vec<&str> = after[..end].split(';').collect();
            let mut k = 0;
            while k < params.len() {
                match params[k] {
                    "" | "0" => reversed = false,
                    "7" => reversed = true,
                    "27" => reversed = false,
                    "38" | "48" => k += 2,
                    _ => {}
                }
                k += 1;
            }
            any |= reversed;
            rest = &after[end + 1..];
        }
        if reversed {
            text.push_str(rest);
        }
        if any && !text.trim().is_empty() {
            out.push(text);
        }
    }
    out
}

/// Press ↑/↓ until the selected process row shows `pid`.
fn select_pid(s: &Session, pid: &str) {
    // A selection is held only once a person picks it (until then it is the top row, which
    // follows re-sorts): always move it, even when the PID is already highlighted.
    keys(s, &["Down", "Up"]);
    for key in ["Up", "Up", "Up", "Down", "Down", "Down", "Down"] {
        if reversed_rows(s).iter().any(|r| r.contains(pid)) {
            return;
        }
        keys(s, &[key]);
    }
    panic!("could not select PID {pid}:\n{}", pane(s));
}

/// `m:ss` of the header's `m:ss / m:ss`, in seconds.
pub(crate) fn position(p: &str) -> u64 {
    let head = p.lines().next().unwrap_or("");
    let at = head
        .find(" / ")
        .unwrap_or_else(|| panic!("no position in {head:?}"));
    let pos = head[..at].rsplit(' ').next().unwrap_or("");
    let (m, s) = pos.split_once(':').unwrap_or_else(|| panic!("{pos:?}"));
    m.parse::<u64>().expect("minutes") * 60 + s.parse::<u64>().expect("seconds")
}

#[test]
fn replay_in_tmux_shows_gpu_and_process_and_q_restores_the_terminal() {
    if !have_tmux() {
        eprintln!("skipping: tmux not installed");
        return;
    }
    let s = start("e2e", |bin, fixture| {
        format!(
            "env LANG=C.UTF-8 TERM=xterm-256color {bin} replay --speed 20 {fixture}; echo EXIT=$?; stty -a | grep -q -- -icanon || echo CANON-OK; sleep 60"
        )
    });
    let p = wait_for(&s, "grow_shrink.py", 15);
    assert!(p.contains("H200"), "GPU name missing:\n{p}");
    assert!(p.contains("grow_shrink.py"), "process row missing:\n{p}");
    assert!(
        p.contains("REPLAY"),
        "a recording must be labelled as such:\n{p}"
    );

    keys(&s, &["Enter"]);
    let p = pane(&s);
    assert!(
        p.contains("GPU-49ba6da8"),
        "detail view shows the UUID:\n{p}"
    );
    assert!(
        p.contains("zoom all"),
        "a recording opens fitted to its whole history, and says so:\n{p}"
    );
    keys(&s, &["w"]);
    assert!(pane(&s).contains("zoom 5m"), "w leaves `all` for a span");
    keys(&s, &["-"]);
    assert!(pane(&s).contains("zoom 15m"), "zoom out widens the window");
    keys(&s, &["+", "+"]);
    assert!(pane(&s).contains("zoom 1m"), "zoom in narrows it");
    keys(&s, &["Tab"]);
    keys(&s, &["Space"]);
    assert!(
        wait_for(&s, "paused", 3).contains("paused"),
        "space pauses a replay"
    );
    keys(&s, &["?"]);
    assert!(pane(&s).contains("again for the legend"));
    keys(&s, &["?"]);
    assert!(pane(&s).contains("legend 2/2"), "second page: the legend");
    keys(&s, &["Escape"]);
    keys(&s, &["q"]);
    let p = wait_for(&s, "CANON-OK", 5);
    assert!(
        p.contains("EXIT=0"),
        "q must end gpumon with status 0:\n{p}"
    );
    assert!(
        p.contains("CANON-OK"),
        "terminal left in raw mode after q:\n{p}"
    );
    assert!(!p.contains("REPLAY"), "alternate screen must be left:\n{p}");
}

#[test]
fn sighup_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let s = start("hup", |bin, fixture| {
        format!(
            "env LANG=C.UTF-8 {bin} replay {fixture} & pid=$!; sleep 1.5; kill -HUP $pid; wait $pid; echo EXIT=$?; stty -a | grep -o -- '-icanon' || echo CANON-OK; sleep 60"
        )
    });
    let p = wait_for(&s, "CANON-OK", 10);
    assert!(p.contains("EXIT=0"), "SIGHUP ends gpumon cleanly:\n{p}");
    assert!(p.contains("CANON-OK"), "terminal left in raw mode:\n{p}");
}

#[test]
fn without_nvml_a_running_companion_is_shown_live_instead_of_the_demo() {
    if !have_tmux() || std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let (dir, mut program) = companion(3);
    let sock = dir.path().join("sock");
    let sock_s = sock.display().to_string();
    let s = start("comp", |bin, _| {
        format!("env LANG=C.UTF-8 {bin} --socket-dir {sock_s}; echo EXIT=$?; sleep 60")
    });
    let p = wait_for(&s, "alloc", 10);
    let _ = program.kill();
    let _ = program.wait();
    assert!(p.contains("LIVE"), "live, not the demo recording:\n{p}");
    assert!(p.contains("allocator state reported by companions"), "{p}");
    assert!(
        p.contains(&program.id().to_string()),
        "companion pid listed:\n{p}"
    );
    assert!(p.contains("alloc"), "allocator numbers shown:\n{p}");
}

#[test]
fn the_selected_pid_stays_selected_for_10_s_of_replay_while_rows_resort() {
    if !have_tmux() {
        return;
    }
    // 461 falls below 510 and 462 at 43 s, then climbs back above them at 45.5 and 46.5 s.
    let s = replay(
        "follow",
        "tests/fixtures/h200_torch_grow_shrink.jsonl",
        "--speed 2",
    );
    // The replay opens at 8.5 s, where the first process shows; six steps of 5 s reach 38.5 s.
    wait_for(&s, "REPLAY", 10);
    keys(&s, &["]", "]", "]", "]", "]", "]"]);
    wait_for(&s, "hold.py 5 30", 5);
    select_pid(&s, "461");
    let mut seen_rows = std::collections::BTreeSet::new();
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        let p = pane(&s);
        let rows = reversed_rows(&s);
        assert!(
            rows.iter().any(|r| r.contains(" 461 ")),
            "selection left PID 461: {rows:?}\n{p}"
        );
        if let Some(i) = p.lines().position(|l| l.contains(" 461 ")) {
            seen_rows.insert(i);
        }
        sleep(Duration::from_millis(200));
    }
    assert!(
        seen_rows.len() >= 2,
        "461 never moved to another row, so nothing re-sorted: {seen_rows:?}"
    );
}

#[test]
fn enter_on_an_alert_of_gpu_1_opens_gpu_1_with_its_process_selected() {
    if !have_tmux() {
        return;
    }
    let s = replay("alert", "tests/corpus/corpus_leak.jsonl", "--speed 20");
    let p = wait_for(&s, "@1 ", 15);
    assert!(p.contains("@1 "), "no alert on GPU 1:\n{p}");
    keys(&s, &["Space", "a"]);
    let p = pane(&s);
    let at = p
        .find("PID ")
        .unwrap_or_else(|| panic!("panel names the PID:\n{p}"));
    let pid: String = p[at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(p[at..].starts_with(&format!("PID {pid} on GPU 1")), "{p}");
    keys(&s, &["Enter"]);
    let p = pane(&s);
    assert!(p.contains("╭ GPU 1 "), "Enter opens GPU 1:\n{p}");
    let rows = reversed_rows(&s);
    assert!(
        rows.iter().any(|r| r.contains(&format!(" {pid} "))),
        "PID {pid} is selected: {rows:?}\n{p}"
    );
    keys(&s, &["Escape"]);
    assert!(pane(&s).contains("Alerts "), "Esc returns to the panel");
}

#[test]
fn speed_keys_accumulate_and_seek_steps_fit_a_142_s_recording() {
    if !have_tmux() {
        return;
    }
    let s = replay("speed", "tests/corpus/corpus_clean.jsonl", "");
    wait_for(&s, "/ 2:22", 10);
    keys(&s, &["Space"]);
    wait_for(&s, "paused", 3);
    tmux(&["send-keys", "-t", &s.0, "-l", ">>>>"]);
    let p = wait_for(&s, "16x", 3);
    assert!(p.contains(" 16x "), "four > from 1x give 16x:\n{p}");
    keys(&s, &["0"]);
    let before = position(&pane(&s));
    keys(&s, &["]"]);
    let p = pane(&s);
    let after = position(&p);
    assert!(before <= 1, "0 goes to the start:\n{p}");
    assert!((5..=40).contains(&after), "] lands at {after} s:\n{p}");
    keys(&s, &["$"]);
    let p = wait_for(&s, "end", 3);
    assert!(p.contains("2:22 / 2:22"), "$ goes to the end:\n{p}");
    assert!(p.contains("end (paused)"), "end shown while paused:\n{p}");
}

#[test]
fn a_filter_hides_the_other_processes() {
    if !have_tmux() {
        return;
    }
    let s = replay(
        "filter",
        "tests/fixtures/h200_torch_grow_shrink.jsonl",
        "--speed 20",
    );
    wait_for(&s, "hold.py 5 30", 10);
    keys(&s, &["Space", "/"]);
    tmux(&["send-keys", "-t", &s.0, "-l", "hold"]);
    keys(&s, &["Enter"]);
    let p = pane(&s);
    assert!(p.contains("hold.py"), "matching processes stay:\n{p}");
    assert!(!p.contains("grow_shrink"), "the others are hidden:\n{p}");
    assert!(p.contains("/hold"), "the header shows the filter:\n{p}");
    keys(&s, &["/", "Escape"]);
    assert!(
        pane(&s).contains("grow_shrink"),
        "Esc in the filter clears it"
    );
}

#[test]
fn kill_names_the_pid_and_ends_a_process_the_test_started() {
    if !have_tmux() || std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    // Without NVML gpumon lists companions live: start one, select it, x, y.
    let (dir, mut program) = companion(1);
    let sock = dir.path().join("sock");
    let pid = program.id().to_string();
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let rec = dir.path().join("rec.gpumon.jsonl");
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} --socket-dir {} --record {}; sleep 60",
        bin.display(),
        sock.display(),
        rec.display()
    );
    let s = start_cmd("kill", 80, 24, &cmd);
    let p = wait_for(&s, &pid, 10);
    assert!(
        p.contains("● REC"),
        "--record shows REC in the header:\n{p}"
    );
    keys(&s, &["x"]);
    let p = pane(&s);
    let ended = |program: &mut std::process::Child| {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if program.try_wait().ok().flatten().is_some() {
                return true;
            }
            sleep(Duration::from_millis(50));
        }
        false
    };
    if !p.contains(&format!("send SIGTERM to PID {pid}")) {
        let _ = program.kill();
        panic!("confirmation names the PID:\n{p}");
    }
    assert!(
        program.try_wait().expect("wait").is_none(),
        "nothing sent before y"
    );
    keys(&s, &["y"]);
    let gone = ended(&mut program);
    if !gone {
        let _ = program.kill();
    }
    let p = pane(&s);
    assert!(gone, "SIGTERM ended the process:\n{p}");
    assert!(p.contains(&format!("SIGTERM sent to PID {pid}")), "{p}");
}
