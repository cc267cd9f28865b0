//! Identity of companions: gpumon believes a socket only
//! when the process behind it is the one it is named after, and never follows
//! a link to a socket elsewhere.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpumon::channel::spawn_with;
use gpumon::model::frame::CompanionFrame;
use gpumon::model::frame::Frame;
use gpumon::wire::Message;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::sync::mpsc;

use crate::support::channel::{HELLO, config, private_dir};

const SAMPLE: &str = r#"{"v":1,"type":"sample","dev":0,"allocated":1125899906842624}"#;

/// A fake companion in this test process: every connection gets a hello and a
/// 1 PiB sample. Returns how many connections it accepted.
fn serve(path: &Path) -> Arc<AtomicUsize> {
    let l = UnixListener::bind(path).expect("bind");
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            n.fetch_add(1, Ordering::SeqCst);
            let _ = s.write_all(format!("{HELLO}\n{SAMPLE}\n").as_bytes()).await;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                drop(s);
            });
        }
    });
    accepted
}

/// Frames for `for_`, until a status containing `until` or the time is up.
async fn watch(rx: &mut mpsc::Receiver<Frame>, within: Duration) -> (Vec<u32>, Vec<String>) {
    let deadline = Instant::now() + within;
    let (mut pids, mut texts) = (Vec::new(), Vec::new());
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Frame::Companion(CompanionFrame { pid, msg, .. }))) => {
                if !matches!(msg, Message::Disconnected(_)) {
                    pids.push(pid);
                }
            }
            Ok(Some(Frame::Status { text, .. })) => texts.push(text),
            Ok(Some(_)) => {}
            _ => return (pids, texts),
        }
    }
}

/// The attack of the review (F4a): a socket named after another process's pid
/// (here pid 1) is served by this test process. Its data must not be shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_named_after_another_pid_is_refused() {
    let dir = private_dir();
    let _n = serve(&dir.path().join("1.sock"));
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(800)).await;
    assert!(pids.is_empty(), "data of an impersonator shown: {pids:?}");
    let me = std::process::id();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("companion 1 refused") && t.contains(&format!("pid {me}"))),
        "status line does not say why: {texts:?}"
    );
}

/// The same process under its own pid is believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_named_after_its_own_pid_is_accepted() {
    let dir = private_dir();
    let me = std::process::id();
    let _n = serve(&dir.path().join(format!("{me}.sock")));
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(800)).await;
    assert!(pids.contains(&me), "{texts:?}");
}

/// The confused deputy (F4b): a link in a scanned directory pointing at a
/// socket elsewhere. gpumon must not connect (not a byte written to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_socket_is_never_connected() {
    let dir = private_dir();
    let elsewhere = private_dir();
    let target = elsewhere.path().join("daemon.sock");
    let accepted = serve(&target);
    let me = std::process::id();
    std::os::unix::fs::symlink(&target, dir.path().join(format!("{me}.sock"))).expect("symlink");
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(800)).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "connected through a link"
    );
    assert!(pids.is_empty());
    assert!(
        texts.iter().any(|t| t.contains("symbolic link")),
        "status line does not say why: {texts:?}"
    );
}

/// A socket file owned by a third user inside a user's directory (needs root
/// to create; skipped otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_of_another_user_in_the_directory_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let dir = private_dir();
    let me = std::process::id();
    let path = dir.path().join(format!("{me}.sock"));
    let accepted = serve(&path);
    std::os::unix::fs::lchown(&path, Some(4242), Some(4242)).expect("chown");
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(800)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    assert!(pids.is_empty());
    assert!(texts.iter().any(|t| t.contains("uid 4242")), "{texts:?}");
}

/// Plays a peer borrowing a pid: a child binds and listens on a socket named
/// after its own pid, hands the listener to its parent, and then either exits
/// (`dead`: the pid has no process) or becomes another program (`reused`: the pid now
/// belongs to a process that does not serve the socket, as a recycled pid would). The
/// parent serves every connection a hello and a 1 PiB sample. Prints the child's pid.
const HANDED_OFF_LISTENER: &str = r#"
import os, socket, sys
d, mode, hello, sample = sys.argv[1:5]
a, b = socket.socketpair()
pid = os.fork()
if pid == 0:
    s = socket.socket(socket.AF_UNIX)
    s.bind(f"{d}/{os.getpid()}.sock")
    s.listen(16)
    socket.send_fds(a, [b"x"], [s.fileno()])
    s.close(); a.close(); b.close()
    if mode == "reused":
        os.execvp("sleep", ["sleep", "30"])
    os._exit(0)
_, fds, _, _ = socket.recv_fds(b, 1, 1)
listener = socket.socket(fileno=fds[0])
if mode == "dead":
    os.waitpid(pid, 0)
print(pid, flush=True)
held = []
while True:
    c, _ = listener.accept()
    c.sendall((hello + "\n" + sample + "\n").encode())
    held.append(c)
"#;

struct Attacker {
    script: std::process::Child,
    pid: u32,
}

impl Drop for Attacker {
    fn drop(&mut self) {
        let _ = self.script.kill();
        let _ = self.script.wait();
        if let Ok(p) = libc::pid_t::try_from(self.pid) {
            // The `reused` child runs `sleep`: ended by its pid, which this test made.
            // SAFETY: a plain kill(2).
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
}

fn handed_off_listener(dir: &Path, mode: &str) -> Attacker {
    use std::io::BufRead;
    let mut script = std::process::Command::new("python3")
        .args(["-c", HANDED_OFF_LISTENER])
        .arg(dir)
        .args([mode, HELLO, SAMPLE])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    let out = script.stdout.take().expect("stdout");
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("pid line");
    let pid = line.trim().parse().expect("a pid");
    Attacker { script, pid }
}

/// A borrowed pid that now belongs to another process: the kernel's peer credentials still
/// name it (so the old pid check passed and its data was shown), but that process
/// does not hold the connection's other end. Refused, and the status line says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_pid_now_runs_another_program_is_refused() {
    let dir = private_dir();
    let a = handed_off_listener(dir.path(), "reused");
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(1200)).await;
    assert!(
        !pids.contains(&a.pid),
        "data of a listener its named process does not serve was shown: {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains(&format!("companion {} refused", a.pid))
                && t.contains("does not hold")),
        "status line does not say why: {texts:?}"
    );
}

/// A borrowed pid with no process at all: its data is never shown and nothing is said. The
/// file is ours but something still listens on it (the listener outlived its process,
/// or lives in a pid namespace gpumon cannot see), so it is left alone: only a file
/// the kernel refuses connections on is stale and removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_pid_has_no_process_is_ignored() {
    let dir = private_dir();
    let a = handed_off_listener(dir.path(), "dead");
    let (tx, mut rx) = mpsc::channel(256);
    let _h = spawn_with(config(dir.path()), tx);
    let (pids, texts) = watch(&mut rx, Duration::from_millis(1000)).await;
    assert!(
        !pids.contains(&a.pid),
        "data under a pid with no process was shown: {texts:?}"
    );
    assert!(
        dir.path().join(format!("{}.sock", a.pid)).exists(),
        "a socket something listens on was removed"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.contains(&format!("companion {}", a.pid))),
        "{texts:?}"
    );
    // Once nothing listens, the file is stale: removed.
    drop(a);
    let stale = dir.path().join(format!("{}.sock", u32::MAX / 2));
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    let deadline = Instant::now() + Duration::from_secs(3);
    while stale.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!stale.exists(), "a stale socket of ours is left behind");
}
