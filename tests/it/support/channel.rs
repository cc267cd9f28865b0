//! The companion side of the channel tests (channel, channel_identity, channel_fairness,
//! record_errors, record_budget): socket directories gpumon accepts, a companion's hello,
//! and the monitor's channel with short timers.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use gpumon::channel::Config;

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
