//! The companion side of the channel tests (channel, channel_identity, channel_fairness,
//! record_errors, record_budget): socket directories gpumon accepts, a companion's hello,
//! and the monitor's channel with short timers.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use gpumon::channel::Config;
use gpumon::model::frame::{CompanionFrame, Frame};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;
use tokio::sync::mpsc;

/// A torch companion's hello with one device and no UUID.
pub const HELLO: &str = r#"{"v":1,"type":"hello","role":"companion","framework":"torch","started":1,"devices":[{"dev":0}]}"#;

/// A socket directory as gpumon wants it: ours, mode 0700.
pub fn private_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

/// The channel scanning only `dir`, with timers short enough for a test; it believes a
/// socket only from the process it is named after, as gpumon does (channel_identity).
pub fn config(dir: &Path) -> Config {
    Config {
        dirs: Some(vec![dir.to_path_buf()]),
        scan_interval: Duration::from_millis(50),
        hello_timeout: Duration::from_millis(500),
        idle_check: Duration::from_millis(300),
        retry_after: Duration::from_secs(60),
        important_wait: Duration::from_secs(2),
        stats_interval: Duration::from_millis(50),
        ..Config::default()
    }
}

/// `config` for in-process fakes that stand for several pids: the peer's pid is not
/// checked (channel_identity checks it).
pub fn config_any_peer(dir: &Path) -> Config {
    Config {
        check_peer_pid: false,
        ..config(dir)
    }
}

/// Serve a hello on every connection to `path`, from this process (each held 5 s).
pub fn serve(path: &Path) {
    serve_on(UnixListener::bind(path).expect("bind"));
}

/// `serve`, on a listener made elsewhere.
pub fn serve_on(l: UnixListener) {
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(format!("{HELLO}\n").as_bytes()).await;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                drop(s);
            });
        }
    });
}

/// How long until the first frame of companion `pid` (`None`: not within `within`).
pub async fn first_frame_of(
    rx: &mut mpsc::Receiver<Frame>,
    pid: u32,
    within: Duration,
) -> Option<Duration> {
    let t0 = Instant::now();
    let deadline = t0 + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Frame::Companion(CompanionFrame { pid: p, .. }))) if p == pid => {
                return Some(t0.elapsed());
            }
            Ok(Some(_)) => {}
            _ => return None,
        }
    }
}
