//! End to end in a real terminal: tmux runs `gpumon replay` at 80x24, the test sends keys
//! and reads the pane. Requires tmux (CI installs it; GPUMON_REQUIRE_TMUX=1 makes its
//! absence a failure instead of a skip).

mod support;

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("GPUMON_REQUIRE_TMUX").is_some() {
        panic!("tmux is required (GPUMON_REQUIRE_TMUX is set) but not installed");
    }
    ok
}

fn pane(s: &Session) -> String {
    tmux(&["capture-pane", "-p", "-t", &s.0])
}

fn wait_for(s: &Session, what: &str, secs: u64) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let p = pane(s);
        if p.contains(what) || Instant::now() > end {
            return p;
        }
        sleep(Duration::from_millis(100));
    }
}

fn keys(s: &Session, k: &[&str]) {
    let mut args = vec!["send-keys", "-t", s.0.as_str()];
    args.extend_from_slice(k);
    tmux(&args);
    sleep(Duration::from_millis(300));
}

/// An 80x24 tmux session running `script(gpumon binary, fixture recording)` in sh.
fn start(tag: &str, script: impl Fn(&str, &str) -> String) -> Session {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let fixture = support::fixture("h200_torch_grow_shrink.jsonl");
    let cmd = script(&bin.display().to_string(), &fixture.display().to_string());
    let name = format!("gpumon-{tag}-{}", std::process::id());
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "80",
        "-y",
        "24",
        &cmd,
    ]);
    Session(name)
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
        p.contains("RECORDING"),
        "a recording must be labelled as such:\n{p}"
    );

    keys(&s, &["Enter"]);
    let p = pane(&s);
    assert!(
        p.contains("GPU-49ba6da8"),
        "detail view shows the UUID:\n{p}"
    );
    assert!(
        p.contains("zoom 5m"),
        "chart axis at the default window:\n{p}"
    );
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
    assert!(pane(&s).contains("toggle this help"));
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
    assert!(
        !p.contains("RECORDING"),
        "alternate screen must be left:\n{p}"
    );
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
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("sock");
    std::fs::create_dir(&sock).expect("mkdir");
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut program = std::process::Command::new("python3")
        .arg(format!("{root}/python/tests/fake_torch_program.py"))
        .arg("3")
        .env("GPUMON_DIR", &sock)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the companion");
    let mut line = String::new();
    let out = program.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("ready");
    assert!(line.starts_with("ready"), "{line}");
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
