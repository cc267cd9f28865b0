//! The channel sleeps until a socket directory changes: a companion that appears
//! is connected at once, however long `scan_interval` is; with nothing happening the thread
//! hardly wakes; and where inotify cannot be had, looking every `scan_interval` still finds
//! every companion.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::Duration;

use gpumon::channel::{ChannelHandle, Config, spawn_with};
use gpumon::model::frame::Frame;
use tokio::sync::mpsc;

use crate::support::channel::{config_any_peer, first_frame_of, private_dir, serve, serve_on};

/// Far longer than any wait here: what is found within it was reported, not looked for.
const LONG: Duration = Duration::from_secs(30);

fn start(cfg: Config) -> (ChannelHandle, mpsc::Receiver<Frame>) {
    let (tx, rx) = mpsc::channel(64);
    (spawn_with(cfg, tx), rx)
}

/// `me`'s first frame comes within 2 s of `since` (made then): with `LONG` intervals, only
/// if the change was reported rather than looked for.
async fn found_soon(rx: &mut mpsc::Receiver<Frame>, me: u32, since: std::time::Instant) {
    let took = first_frame_of(rx, me, Duration::from_secs(5))
        .await
        .map(|_| since.elapsed());
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(2)),
        "first frame {took:?} after the socket was made"
    );
}

/// A channel watching a private directory with `LONG` intervals, after a quiet second past its
/// first scan (a change then is looked at at once, not owed).
async fn watching_quietly() -> (tempfile::TempDir, ChannelHandle, mpsc::Receiver<Frame>) {
    let dir = private_dir();
    let (h, rx) = start(Config {
        scan_interval: LONG,
        ..config_any_peer(dir.path())
    });
    tokio::time::sleep(Duration::from_millis(1200)).await;
    (dir, h, rx)
}

/// After the first scan has been made (and the watches set).
async fn settled() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn mkdir_0700(path: &Path) {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .expect("mkdir");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_made_in_a_watched_directory_is_connected_at_once() {
    let (dir, _h, mut rx) = watching_quietly().await;
    let me = std::process::id();
    let t0 = std::time::Instant::now();
    serve(&dir.path().join(format!("{me}.sock")));
    found_soon(&mut rx, me, t0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_made_after_the_monitor_started_is_found_at_once() {
    let root = private_dir();
    // Two levels missing: awaited from the nearest ancestor that exists, then one step down.
    let parent = root.path().join("run");
    let dir = parent.join("gpumon");
    let (_h, mut rx) = start(Config {
        scan_interval: LONG,
        ..config_any_peer(&dir)
    });
    settled().await;
    mkdir_0700(&parent);
    settled().await;
    mkdir_0700(&dir);
    let me = std::process::id();
    let t0 = std::time::Instant::now();
    serve(&dir.join(format!("{me}.sock")));
    found_soon(&mut rx, me, t0).await;
}

/// A socket bound at `path` that listens only `after` it: a companion between its `bind`
/// and its `listen`, which is when its file's creation wakes the scanner.
async fn bind_then_listen(path: &Path, after: Duration) {
    // SAFETY: plain flags; returns a new fd or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket");
    // SAFETY: the fd was just returned to us and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = path.as_os_str().as_bytes();
    assert!(name.len() < addr.sun_path.len(), "path too long");
    for (d, s) in addr.sun_path.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: a valid sockaddr_un of `len` bytes, on our own socket.
    let rc = unsafe { libc::bind(fd_raw(&fd), (&raw const addr).cast(), len) };
    assert_eq!(rc, 0, "bind");
    tokio::time::sleep(after).await;
    // SAFETY: our own bound socket.
    assert_eq!(unsafe { libc::listen(fd_raw(&fd), 8) }, 0, "listen");
    let l = std::os::unix::net::UnixListener::from(fd);
    l.set_nonblocking(true).expect("nonblocking");
    serve_on(tokio::net::UnixListener::from_std(l).expect("listener"));
}

fn fd_raw(fd: &OwnedFd) -> libc::c_int {
    std::os::fd::AsRawFd::as_raw_fd(fd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_listens_a_moment_after_it_is_made_is_still_connected() {
    let (dir, _h, mut rx) = watching_quietly().await;
    let me = std::process::id();
    let t0 = std::time::Instant::now();
    bind_then_listen(
        &dir.path().join(format!("{me}.sock")),
        Duration::from_millis(300),
    )
    .await;
    // Refused while it did not listen, it is not left for `retry_after` (60 s here).
    found_soon(&mut rx, me, t0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_happening_the_thread_hardly_wakes() {
    let dir = private_dir();
    // gpumon's own interval: looking would make five or six scans in 5 s.
    let (h, _rx) = start(Config {
        scan_interval: Duration::from_secs(1),
        ..config_any_peer(dir.path())
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    let n = h.scans();
    assert!((1..=2).contains(&n), "{n} scans in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_inotify_looking_every_interval_still_finds_a_socket() {
    let dir = private_dir();
    let (h, mut rx) = start(Config {
        scan_interval: Duration::from_millis(200),
        watch: false,
        ..config_any_peer(dir.path())
    });
    settled().await;
    let me = std::process::id();
    let t0 = std::time::Instant::now();
    serve(&dir.path().join(format!("{me}.sock")));
    found_soon(&mut rx, me, t0).await;
    let before = h.scans();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = h.scans() - before;
    assert!(n >= 3, "{n} scans in 1 s at a 200 ms interval");
}
