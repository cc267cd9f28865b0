//! The channel sleeps until a socket directory changes (issue 21): a companion that appears
//! is connected at once, however long `scan_interval` is; with nothing happening the thread
//! hardly wakes; and where inotify cannot be had, looking every `scan_interval` still finds
//! every companion.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::Duration;

use gpumon::channel::{ChannelHandle, Config, spawn_with};
use gpumon::model::frame::Frame;
use tokio::sync::mpsc;

use crate::support::channel::{config_any_peer, first_frame_of, private_dir, serve};

/// Far longer than any wait here: what is found within it was reported, not looked for.
const LONG: Duration = Duration::from_secs(30);

fn start(cfg: Config) -> (ChannelHandle, mpsc::Receiver<Frame>) {
    let (tx, rx) = mpsc::channel(64);
    (spawn_with(cfg, tx), rx)
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
    let dir = private_dir();
    let (_h, mut rx) = start(Config {
        scan_interval: LONG,
        ..config_any_peer(dir.path())
    });
    settled().await;
    let me = std::process::id();
    serve(&dir.path().join(format!("{me}.sock")));
    let took = first_frame_of(&mut rx, me, Duration::from_secs(5)).await;
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(2)),
        "first frame after {took:?}"
    );
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
    serve(&dir.join(format!("{me}.sock")));
    let took = first_frame_of(&mut rx, me, Duration::from_secs(5)).await;
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(2)),
        "first frame after {took:?}"
    );
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
    serve(&dir.path().join(format!("{me}.sock")));
    let took = first_frame_of(&mut rx, me, Duration::from_secs(5)).await;
    assert!(
        took.is_some_and(|t| t < Duration::from_secs(2)),
        "first frame after {took:?}"
    );
    let before = h.scans();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = h.scans() - before;
    assert!(n >= 3, "{n} scans in 1 s at a 200 ms interval");
}
