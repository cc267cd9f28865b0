//! `killed` on the screen for a process that really was killed: two real
//! programs with the real companion (python, fake torch) report to a real `gpumon record`;
//! one is killed with SIGKILL, the other ends and says goodbye. What the recorder wrote of
//! them (their hello, samples, the goodbye and the dropped connections, as the channel saw
//! them) is replayed in a terminal with the NVML listing a GPU would have given beside it
//! (this machine has none): the killed one's row says `killed`, the other's `exited`.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::tmux_e2e::{have_tmux, keys, start_cmd, wait_for};

/// A fake-torch program whose companion reports into `sock`; returns once it is ready.
fn program(sock: &std::path::Path) -> Child {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut p = Command::new("python3")
        .arg(format!("{root}/python/tests/fake_torch_program.py"))
        .arg("2")
        .env("GPUMON_DIR", sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the companion");
    let mut line = String::new();
    let out = p.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("ready");
    assert!(line.starts_with("ready"), "{line}");
    p
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits until `ok` holds for the recording's lines, at most `secs`.
fn wait_rec(path: &std::path::Path, secs: u64, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = lines(path);
        if ok(&v) || Instant::now() > end {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn companion_msgs(v: &[Value], pid: u32, kind: &str) -> usize {
    v.iter()
        .filter(|l| l["type"] == "companion" && l["pid"] == pid && l["msg"]["type"] == kind)
        .count()
}

#[test]
fn a_process_killed_by_a_signal_is_shown_killed_and_one_that_ended_exited() {
    if !have_tmux() || std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("sock");
    std::fs::create_dir(&sock).expect("mkdir");
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let rec = dir.path().join("companions.gpumon.jsonl");
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let mut recorder = Command::new(&bin)
        .args(["record", "--format", "ndjson", "--socket-dir"])
        .arg(&sock)
        .arg("-o")
        .arg(&rec)
        .stderr(Stdio::null())
        .spawn()
        .expect("gpumon record starts");
    let mut killed = program(&sock);
    let mut ended = program(&sock);
    let (k, e) = (killed.id(), ended.id());
    let v = wait_rec(&rec, 15, |v| {
        companion_msgs(v, k, "hello") == 1 && companion_msgs(v, e, "hello") == 1
    });
    assert_eq!(
        companion_msgs(&v, k, "hello"),
        1,
        "both companions recorded"
    );
    killed.kill().expect("SIGKILL");
    let status = killed.wait().expect("reaped");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    drop(ended.stdin.take());
    assert!(ended.wait().expect("reaped").success(), "ends cleanly");
    let v = wait_rec(&rec, 15, |v| {
        companion_msgs(v, k, "disconnected") == 1 && companion_msgs(v, e, "disconnected") == 1
    });
    // SAFETY: a signal to the recorder this test started, still unreaped.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGTERM) };
    let _ = recorder.wait();
    assert_eq!(
        companion_msgs(&v, k, "bye"),
        0,
        "a killed program says no goodbye"
    );
    assert_eq!(companion_msgs(&v, e, "bye"), 1, "the other one does");
    assert_eq!(companion_msgs(&v, k, "disconnected"), 1, "{v:?}");

    // The companions' frames as recorded, on the clock of a one-GPU host whose NVML lists
    // both programs until their connection dropped.
    let ends = |pid: u32| {
        v.iter()
            .filter(|l| l["pid"] == pid && l["msg"]["type"] == "disconnected")
            .filter_map(|l| l["t"].as_i64())
            .next()
            .expect("disconnect time")
    };
    let companion: Vec<&Value> = v.iter().filter(|l| l["type"] == "companion").collect();
    let t0 = companion
        .iter()
        .filter_map(|l| l["t"].as_i64())
        .min()
        .expect("frames")
        - 2_000;
    let t_end = ends(k).max(ends(e)) + 8_000;
    let total: u64 = 150_754_820_096;
    let infos: Vec<Value> = [(k, "killed_run"), (e, "clean_run")]
        .iter()
        .map(|(pid, name)| {
            json!({"pid": pid, "user": "test", "name": "python3",
                "cmdline": format!("python3 fake_torch_program.py --name {name}"),
                "env_readable": true, "cuda_visible_devices": "0"})
        })
        .collect();
    let mut out: Vec<(i64, Value)> = vec![(t0, json!({"type": "procs", "t": t0, "procs": infos}))];
    let mut t = t0;
    while t <= t_end {
        let procs: Vec<Value> = [k, e]
            .iter()
            .filter(|p| t <= ends(**p))
            .map(|p| json!({"pid": p, "kind": "compute", "used": 2u64 << 30}))
            .collect();
        let used = 2u64 << 30;
        out.push((
            t,
            json!({"type": "tick", "t": t, "gpus": [{"index": 0, "mem": {"total": total,
                "used": used, "free": total - used, "reserved": 0}, "util": 50, "procs": procs}]}),
        ));
        t += 1_000;
    }
    out.extend(
        companion
            .iter()
            .map(|l| (l["t"].as_i64().unwrap_or(t0), (*l).clone())),
    );
    out.sort_by_key(|(t, _)| *t);
    let header = json!({"type": "header", "v": 1, "format": "gpumon", "host": "test",
        "started": t0, "interval_ms": 1000, "gpumon_version": "test",
        "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-00000000-test",
                  "pci_bus_id": "00000000:00:06.0", "memory_total": total}]});
    let play = dir.path().join("ended.gpumon.jsonl");
    let mut f = std::fs::File::create(&play).expect("create");
    writeln!(f, "{header}").expect("write");
    for (_, l) in &out {
        writeln!(f, "{l}").expect("write");
    }
    drop(f);

    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay --speed max {}; sleep 60",
        bin.display(),
        play.display()
    );
    let s = start_cmd("killed", 120, 40, &cmd);
    wait_for(&s, "REPLAY", 15);
    keys(&s, &["$"]);
    let p = wait_for(&s, "killed", 15);
    let row = |pid: u32| {
        p.lines()
            .find(|l| l.contains(&format!(" {pid} ")) && l.contains("_run"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row(k).contains("killed"), "SIGKILLed: {}\n{p}", row(k));
    assert!(row(e).contains("exited"), "said goodbye: {}\n{p}", row(e));
    assert!(!row(e).contains("killed"), "{p}");
}
