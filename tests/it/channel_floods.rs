//! Floods of names: directories made for uids that run nothing,
//! socket files under ever new names, and more sockets than gpumon connects to at once.
//! None of them may blind the channel or grow what it remembers.

use std::time::{Duration, Instant};

use gpumon::channel::dirs::Places;
use gpumon::channel::{Config, MAX_CONNS_PER_OWNER, spawn_with};
use gpumon::model::frame::Frame;
use tokio::sync::mpsc;

use crate::support::channel::{config, config_any_peer, first_frame_of, private_dir, serve};
use crate::support::serial::flood;

/// 15,000 empty `gpumon-<N>` directories (made by another user in an attack run) took
/// a root gpumon's channel thread whole: 0 companion frames in 30 s. The channel no
/// longer lists the shared directory; it looks only at the places of users that have a
/// process. Root only (others never look at other users' places).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_thousand_empty_directories_do_not_delay_discovery() {
    if gpumon::channel::dirs::own_uid() != 0 {
        eprintln!("needs root: only root looks at other users' directories");
        return;
    }
    let _f = flood();
    // On tmpfs where there is one: removing 15,000 directories took this disk a minute.
    let root = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tmp");
    let tmp = root.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    for n in 100_000..115_000 {
        std::fs::create_dir(tmp.join(format!("gpumon-{n}"))).expect("mkdir");
    }
    let own = tmp.join("gpumon-0");
    std::fs::create_dir(&own).expect("mkdir");
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let me = std::process::id();
    serve(&own.join(format!("{me}.sock")));
    let cfg = Config {
        dirs: None,
        places: Places {
            tmp,
            run_user: root.path().join("run-user"),
            proc: "/proc".into(),
        },
        ..config(root.path())
    };
    let (tx, mut rx) = mpsc::channel(1024);
    let _h = spawn_with(cfg, tx);
    let took = first_frame_of(&mut rx, me, Duration::from_secs(5)).await;
    // The review measured 693 ms at 5,000 directories and never at 15,000.
    assert!(
        took.is_some_and(|t| t < Duration::from_millis(500)),
        "first frame after {took:?}"
    );
}

/// Socket files under ever new names grew root gpumon to 248 MB, for good: every
/// path ever seen was remembered. Now a path is forgotten once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_name_churn_keeps_what_is_remembered_bounded() {
    let _f = flood();
    let dir = private_dir();
    let (tx, _rx) = mpsc::channel::<Frame>(1024);
    let h = spawn_with(config_any_peer(dir.path()), tx);
    let live = 300;
    let mut peak = 0;
    let mut next = 1_000_000u32;
    let t0 = Instant::now();
    let mut made = 0;
    while t0.elapsed() < Duration::from_secs(2) {
        // A new generation of names; the previous one goes.
        let old: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        for _ in 0..live {
            std::fs::write(dir.path().join(format!("{next}.sock")), b"").expect("file");
            next += 1;
            made += 1;
        }
        for p in old {
            let _ = std::fs::remove_file(p);
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        peak = peak.max(h.remembered());
    }
    assert!(made > 5 * live, "churned only {made} names");
    assert!(
        peak <= 2 * live + 10,
        "remembered {peak} paths of {made} names"
    );
    for e in std::fs::read_dir(dir.path()).expect("dir").flatten() {
        let _ = std::fs::remove_file(e.path());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.remembered(), 0, "paths kept after every socket went");
}

/// One task per socket file, uncapped (20,000 files: 113 MB). A user's directory
/// now gets at most `MAX_CONNS_PER_OWNER` connections at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_user_are_capped() {
    let _f = flood();
    let dir = private_dir();
    // Listeners that accept and never say hello: each connection waits for its timeout.
    let mut held = Vec::new();
    for n in 1..=200u32 {
        held.push(
            std::os::unix::net::UnixListener::bind(dir.path().join(format!("{n}.sock")))
                .expect("bind"),
        );
    }
    let (tx, _rx) = mpsc::channel::<Frame>(1024);
    let cfg = Config {
        hello_timeout: Duration::from_secs(3),
        ..config_any_peer(dir.path())
    };
    let h = spawn_with(cfg, tx);
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(800) {
        peak = peak.max(h.connected());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(peak > 0, "nothing connected");
    assert!(peak <= MAX_CONNS_PER_OWNER, "{peak} connections at once");
}
