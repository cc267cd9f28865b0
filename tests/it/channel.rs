//! The companion channel over real Unix sockets, without a GPU: fake
//! companions written here, and the real Python companion (with a fake torch).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpumon::channel::spawn_with;
use gpumon::model::frame::CompanionFrame;
use gpumon::model::frame::{Frame, Level};
use gpumon::model::state::State;
use gpumon::wire::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

// In-process fakes stand for several pids: channel_identity checks the peer's pid.
use crate::support::channel::{config_any_peer, private_dir};
use crate::support::serial::flood;

/// Pids of processes that exist, so gpumon's "process gone" check keeps them.
fn live_pid(i: usize) -> u32 {
    [std::process::id(), 1, std::os::unix::process::parent_id()][i]
}

async fn next_matching(
    rx: &mut mpsc::Receiver<Frame>,
    within: Duration,
    mut pred: impl FnMut(&Frame) -> bool,
) -> Frame {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(f)) if pred(&f) => return f,
            Ok(Some(_)) => {}
            Ok(None) => panic!("channel closed"),
            Err(_) => panic!("no matching frame within {within:?}"),
        }
    }
}

fn companion_msg(f: &Frame) -> Option<(u32, &Message)> {
    match f {
        Frame::Companion(CompanionFrame { pid, msg, .. }) => Some((*pid, msg)),
        _ => None,
    }
}

fn status_text(f: &Frame) -> Option<(Level, &str)> {
    match f {
        Frame::Status { level, text, .. } => Some((*level, text.as_str())),
        _ => None,
    }
}

/// A scripted companion: accepts one monitor, checks its hello, then writes `script`.
async fn fake_companion(path: PathBuf, script: Vec<u8>, hold: Duration) -> String {
    let l = UnixListener::bind(&path).expect("bind");
    let (s, _) = l.accept().await.expect("accept");
    let (rd, mut wr) = s.into_split();
    let mut rd = BufReader::new(rd);
    let mut hello = String::new();
    rd.read_line(&mut hello).await.expect("monitor hello");
    wr.write_all(&script).await.expect("write script");
    tokio::time::sleep(hold).await;
    hello
}

const HELLO: &str = r#"{"v":1,"type":"hello","role":"companion","framework":"torch","started":1,"devices":[{"dev":0,"uuid":"GPU-1"}]}"#;
const SAMPLE: &str = r#"{"v":1,"type":"sample","dev":0,"allocated":5,"reserved":9}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_and_stream() {
    let dir = private_dir();
    let pid = live_pid(0);
    let script = format!("{HELLO}\n{SAMPLE}\n").into_bytes();
    let comp = tokio::spawn(fake_companion(
        dir.path().join(format!("{pid}.sock")),
        script,
        Duration::from_secs(2),
    ));
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
        companion_msg(f).is_some()
    })
    .await;
    let (p, m) = companion_msg(&f).expect("companion frame");
    assert_eq!(p, pid);
    assert!(matches!(m, Message::Hello(h) if h.framework == Some(gpumon::wire::Framework::Torch)));
    next_matching(
        &mut rx,
        Duration::from_secs(5),
        |f| matches!(companion_msg(f), Some((_, Message::Sample(s))) if s.allocated == Some(5)),
    )
    .await;
    let monitor_hello = comp.await.expect("companion task");
    let v: serde_json::Value = serde_json::from_str(monitor_hello.trim()).expect("json hello");
    assert_eq!(v["type"], "hello");
    assert_eq!(v["min_v"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_mismatch_both_ways() {
    let dir = private_dir();
    // Companion too new: its hello says v2.
    let new = r#"{"v":2,"type":"hello","role":"companion"}"#.to_string() + "\n";
    tokio::spawn(fake_companion(
        dir.path().join(format!("{}.sock", live_pid(0))),
        new.into_bytes(),
        Duration::from_secs(2),
    ));
    // Monitor too new for the companion: it answers with a version error.
    let err = r#"{"v":1,"type":"error","code":"version","text":"companion speaks v1, monitor wants v2..v3"}"#
        .to_string()
        + "\n";
    tokio::spawn(fake_companion(
        dir.path().join(format!("{}.sock", live_pid(1))),
        err.into_bytes(),
        Duration::from_secs(2),
    ));
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
            status_text(f).is_some_and(|(l, _)| l == Level::Error)
        })
        .await;
        seen.push(status_text(&f).expect("status").1.to_string());
    }
    seen.sort();
    assert!(
        seen[0].contains("refused: companion speaks v1, monitor wants v2..v3"),
        "{seen:?}"
    );
    assert!(
        seen[1].contains("too new: v2; this gpumon speaks v1"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_garbage_and_unknown_are_counted_and_skipped() {
    let dir = private_dir();
    let mut script = format!("{HELLO}\n").into_bytes();
    script.extend_from_slice(b"not json at all\n\xff\xfe\n[1,2]\n");
    script.extend(std::iter::repeat_n(b'x', 70_000));
    script.extend_from_slice(b"\n{\"v\":1,\"type\":\"from_the_future\",\"x\":1}\n");
    script.extend_from_slice(b"{\"type\":\"link\",\"dropped\":99}\n");
    script.extend_from_slice(format!("{SAMPLE}\n").as_bytes());
    tokio::spawn(fake_companion(
        dir.path().join(format!("{}.sock", live_pid(0))),
        script,
        Duration::from_secs(3),
    ));
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    next_matching(&mut rx, Duration::from_secs(5), |f| {
        matches!(companion_msg(f), Some((_, Message::Sample(_))))
    })
    .await;
    let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
        matches!(companion_msg(f), Some((_, Message::Link(_))))
    })
    .await;
    let Some((_, Message::Link(l))) = companion_msg(&f) else {
        unreachable!("matched above")
    };
    assert_eq!(l.oversize, 1);
    assert_eq!(l.unknown, 1);
    assert_eq!(
        l.rejected, 4,
        "not json, not utf-8, not an object, a gpumon-local type"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_peer_is_closed_after_too_many_bad_lines() {
    let dir = private_dir();
    let mut script = format!("{HELLO}\n").into_bytes();
    for _ in 0..=gpumon::channel::MAX_REJECTS {
        script.extend_from_slice(b"{bad\n");
    }
    tokio::spawn(fake_companion(
        dir.path().join(format!("{}.sock", live_pid(0))),
        script,
        Duration::from_secs(5),
    ));
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
        matches!(companion_msg(f), Some((_, Message::Disconnected(_))))
    })
    .await;
    let Some((_, Message::Disconnected(d))) = companion_msg(&f) else {
        unreachable!("matched above")
    };
    assert_eq!(d.reason, "hostile or broken peer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_and_stalled_companions_do_not_block_a_good_one() {
    let _flood = flood();
    let dir = private_dir();
    // Stalled: accepts, reads the hello, never answers.
    let stalled = dir.path().join(format!("{}.sock", live_pid(1)));
    let l = UnixListener::bind(&stalled).expect("bind");
    tokio::spawn(async move {
        let (s, _) = l.accept().await.expect("accept");
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    });
    // Flooding: an endless stream of samples on two devices.
    let flood = dir.path().join(format!("{}.sock", live_pid(2)));
    let l = UnixListener::bind(&flood).expect("bind");
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.expect("accept");
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf).await;
        let _ = s.write_all(format!("{HELLO}\n").as_bytes()).await;
        let mut batch = Vec::new();
        for i in 0..2_000u64 {
            batch.extend_from_slice(
                format!(
                    "{{\"v\":1,\"type\":\"sample\",\"dev\":{},\"allocated\":{i}}}\n",
                    i % 2
                )
                .as_bytes(),
            );
        }
        loop {
            if s.write_all(&batch).await.is_err() {
                return;
            }
        }
    });
    // Good: hello, then an epoch after a moment.
    let good = dir.path().join(format!("{}.sock", live_pid(0)));
    let script =
        format!("{HELLO}\n{{\"v\":1,\"type\":\"epoch\",\"epoch\":7,\"dev\":0,\"floor\":1}}\n");
    tokio::spawn(fake_companion(
        good,
        script.into_bytes(),
        Duration::from_secs(5),
    ));

    // A tiny queue and a slow reader: the flood must be coalesced, not queued.
    let (tx, mut rx) = mpsc::channel(8);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let start = Instant::now();
    let mut got_epoch = false;
    let mut stalled_reported = false;
    let mut flood_samples = 0u64;
    let mut flood_drops = 0u64;
    while start.elapsed() < Duration::from_secs(8)
        && !(got_epoch && stalled_reported && flood_drops > 0)
    {
        let Ok(Some(f)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await else {
            continue;
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
        match &f {
            Frame::Companion(CompanionFrame {
                pid,
                msg: Message::Epoch(e),
                ..
            }) => {
                assert_eq!(*pid, live_pid(0));
                assert_eq!(e.epoch, 7);
                got_epoch = true;
            }
            Frame::Companion(CompanionFrame {
                pid,
                msg: Message::Sample(_),
                ..
            }) if *pid == live_pid(2) => flood_samples += 1,
            Frame::Companion(CompanionFrame {
                pid,
                msg: Message::Link(l),
                ..
            }) if *pid == live_pid(2) => flood_drops = l.dropped,
            Frame::Status { text, .. } if text.contains("sent no hello") => stalled_reported = true,
            _ => {}
        }
    }
    assert!(got_epoch, "the good companion's epoch got through");
    assert!(stalled_reported, "the stalled one was given up on");
    assert!(flood_samples > 0);
    assert!(flood_drops > 0, "flood samples were coalesced and counted");
}

fn python_available() -> bool {
    std::process::Command::new("python3")
        .arg("-c")
        .arg("import sys; assert sys.version_info >= (3, 9)")
        .status()
        .is_ok_and(|s| s.success())
}

/// The real Python companion with a fake torch, in a child process.
struct PyCompanion {
    child: tokio::process::Child,
    pid: u32,
}

async fn python_companion(dir: &Path, epochs: u32) -> PyCompanion {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut child = tokio::process::Command::new("python3")
        .arg(format!("{root}/python/tests/fake_torch_program.py"))
        .arg(epochs.to_string())
        .env("GPUMON_DIR", dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(out).read_line(&mut line),
    )
    .await
    .expect("companion ready in time")
    .expect("read");
    let pid = line
        .trim()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .expect("ready line");
    PyCompanion { child, pid }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_companion_end_to_end_two_monitors_history_and_death() {
    if !python_available() {
        eprintln!("python3 >= 3.9 not found; the Python end-to-end test needs it");
        return;
    }
    let dir = private_dir();
    let mut py = python_companion(dir.path(), 4).await;
    assert_eq!(py.pid, py.child.id().expect("running"));

    // Two monitors, both started after the epochs: both get the history.
    let (tx1, mut rx1) = mpsc::channel(256);
    let (tx2, mut rx2) = mpsc::channel(256);
    let h1 = spawn_with(config_any_peer(dir.path()), tx1);
    let h2 = spawn_with(config_any_peer(dir.path()), tx2);
    let mut state = State::default();
    for rx in [&mut rx1, &mut rx2] {
        let f = next_matching(rx, Duration::from_secs(10), |f| {
            state.apply(f);
            matches!(companion_msg(f), Some((_, Message::History(h))) if !h.epochs.is_empty())
        })
        .await;
        let Some((pid, Message::History(h))) = companion_msg(&f) else {
            unreachable!("matched above")
        };
        assert_eq!(pid, py.pid);
        let floors: Vec<u64> = h.epochs.iter().filter_map(|e| e.floor).collect();
        assert_eq!(floors.len(), 4);
        assert!(
            floors.windows(2).all(|w| w[1] == w[0] + (100 << 20)),
            "{floors:?}"
        );
        assert_eq!(h.markers.len(), 4);
    }
    // Live data into the model: torch hello, samples, a block map with F.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let f = next_matching(&mut rx1, Duration::from_secs(10), |_| true).await;
        state.apply(&f);
        let p = state.companions.get(py.pid);
        let done = p.is_some_and(|p| {
            // A torch hello (the panel words it `torch VERSION`).
            p.hello
                .as_ref()
                .is_some_and(|h| h.framework == Some(gpumon::wire::Framework::Torch))
                && p.devices.get(&0).is_some_and(|d| {
                    d.allocated_now().is_some() && d.frag.as_ref().is_some_and(|f| f.hist.is_some())
                })
        });
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "no torch data in the model");
    }
    let d = &state.companions.get(py.pid).expect("pid").devices[&0];
    let fr = d.frag.as_ref().expect("frag");
    assert_eq!(fr.free_total, Some((500 * 18) << 20));
    assert!((fr.index().expect("F") - (1.0 - 1.0 / 500.0)).abs() < 1e-9);
    assert_eq!(d.epochs.len(), 4);
    assert_eq!(h1.connected(), 1);
    assert_eq!(h2.connected(), 1);

    // Kill -9: no bye, the socket file stays; gpumon must still drop the process.
    py.child.kill().await.expect("kill");
    let f = next_matching(&mut rx1, Duration::from_secs(10), |f| {
        matches!(companion_msg(f), Some((_, Message::Disconnected(_))))
    })
    .await;
    state.apply(&f);
    assert!(
        state.companions.get(py.pid).is_none(),
        "a dead process leaves no state"
    );
    // Its socket is stale now: gpumon removes it on the next attempt... after retry_after;
    // the file must at least never be connected to again without a listener.
    drop(h2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_stop_sends_bye_then_disconnect() {
    if !python_available() {
        eprintln!("python3 >= 3.9 not found; skipping");
        return;
    }
    let dir = private_dir();
    let mut py = python_companion(dir.path(), 1).await;
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    next_matching(&mut rx, Duration::from_secs(10), |f| {
        matches!(companion_msg(f), Some((_, Message::Hello(_))))
    })
    .await;
    drop(py.child.stdin.take());
    next_matching(&mut rx, Duration::from_secs(10), |f| {
        matches!(companion_msg(f), Some((_, Message::Bye(b))) if b.reason.as_deref() == Some("done"))
    })
    .await;
    let f = next_matching(&mut rx, Duration::from_secs(10), |f| {
        matches!(companion_msg(f), Some((_, Message::Disconnected(_))))
    })
    .await;
    let Some((_, Message::Disconnected(d))) = companion_msg(&f) else {
        unreachable!("matched above")
    };
    assert_eq!(d.reason, "done");
    let _ = py.child.wait().await;
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").next().is_none(),
        "the companion removed its socket"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_of_another_user_is_refused() {
    if gpumon::channel::dirs::own_uid() != 0 || !python_available() {
        // Without root no second uid exists to test with; the rule itself is
        // unit-tested in channel::dirs.
        eprintln!("needs root and python3; peer rule covered by unit tests");
        return;
    }
    let dir = private_dir();
    let path = dir.path().join(format!("{}.sock", live_pid(1)));
    // Bound as root, then listen() as nobody: SO_PEERCRED reports the listener's
    // credentials at listen time, i.e. nobody's, in root's own directory.
    let code = "import socket,os,sys,time\n\
                s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1])\n\
                os.setgid(65534);os.setuid(65534)\n\
                s.listen(1)\nprint('ready',flush=True)\n\
                c,_=s.accept()\n\
                try: c.sendall(b'{\"v\":1,\"type\":\"hello\",\"role\":\"companion\"}\\n')\n\
                except OSError: pass\n\
                time.sleep(3)\n";
    let mut child = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(code)
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .await
        .expect("ready");
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
        status_text(f).is_some_and(|(_, t)| t.contains("refused")) || companion_msg(f).is_some()
    })
    .await;
    let (level, text) = status_text(&f).expect("a refusal, not companion data");
    assert_eq!(level, Level::Warn);
    assert!(text.contains("uid 65534"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_directory_is_refused_with_a_status() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.path().join(format!("{}.sock", live_pid(0)));
    let _l = UnixListener::bind(&path).expect("bind");
    let (tx, mut rx) = mpsc::channel(64);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let f = next_matching(&mut rx, Duration::from_secs(5), |f| {
        status_text(f).is_some()
    })
    .await;
    assert!(status_text(&f).expect("status").1.contains("0700"));
    // And nothing connects.
    assert!(
        UnixStream::connect(&path).await.is_ok(),
        "listener is still there, untouched"
    );
}

/// The review's C2 end to end: another process of the same user holds 1,000 connections
/// to a real Python companion that never say hello, reconnecting each one dropped; a
/// gpumon monitor started meanwhile got no hello and no frame in 15 s. It is served now
/// (the companion reads a hello as it accepts, bounds pending connections per peer, and
/// gpumon connects again while the backlog is full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_held_by_another_process_cannot_keep_gpumon_out() {
    if !python_available() {
        eprintln!("python3 >= 3.9 not found; the Python end-to-end test needs it");
        return;
    }
    let _flood = flood();
    let dir = private_dir();
    let py = python_companion(dir.path(), 2).await;
    let sock = dir.path().join(format!("{}.sock", py.pid));
    let hold = r#"
import resource, selectors, socket, sys, time
path, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
sel, held, ready = selectors.DefaultSelector(), set(), False
t_end = time.time() + secs
while time.time() < t_end:
    while len(held) < n:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except OSError:
            s.close()
            break
        held.add(s)
        sel.register(s, selectors.EVENT_READ)
    if not ready:
        print("READY", len(held), flush=True)
        ready = True
    for key, _ in sel.select(0.005):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            held.discard(s)
"#;
    let mut attacker = tokio::process::Command::new("python3")
        .args(["-c", hold])
        .arg(&sock)
        .args(["1000", "20"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(attacker.stdout.take().expect("piped"))
        .read_line(&mut line)
        .await
        .expect("read");
    assert!(line.starts_with("READY"), "{line}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config_any_peer(dir.path()), tx);
    let pid = py.pid;
    let f = next_matching(
        &mut rx,
        Duration::from_secs(10),
        |f| matches!(companion_msg(f), Some((p, Message::History(_))) if p == pid),
    )
    .await;
    assert!(companion_msg(&f).is_some());
    eprintln!(
        "served under 1,000 idle connections after {:?}",
        t0.elapsed()
    );
    let _ = attacker.kill().await;
}
