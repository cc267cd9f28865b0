//! The companion channel, monitor side: find companions' sockets, connect,
//! check credentials, handshake, and forward their messages as frames.
//! Protocol: docs/protocol.md. The companion side is `python/gpumon`.

pub mod budget;
mod conn;
pub mod dirs;
mod forward;
mod liveness;
mod verify;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::Sender;
use tokio::task::JoinSet;

use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::model::time::now_ms;

pub use conn::{MAX_REJECTS, Outcome};

#[derive(Debug, Clone)]
pub struct Config {
    /// Directories to scan; `None` = the protocol's default places (and, as
    /// root, every user's).
    pub dirs: Option<Vec<PathBuf>>,
    pub scan_interval: Duration,
    pub hello_timeout: Duration,
    /// Silence after which gpumon checks that the process still exists.
    pub idle_check: Duration,
    /// Wait before reconnecting to a companion that hung up on us.
    pub retry_after: Duration,
    /// Longest an important frame (hello, epoch, event) waits for a full queue.
    pub important_wait: Duration,
    /// Link counters are sent at most this often.
    pub stats_interval: Duration,
    /// Refuse a companion whose `SO_PEERCRED` pid is not the pid its socket is
    /// named after (impersonation). Off only for tests whose in-process fake
    /// companions stand for several pids.
    pub check_peer_pid: bool,
    /// What one connection may cost (`budget`).
    pub budget: budget::Rates,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dirs: None,
            scan_interval: Duration::from_secs(1),
            hello_timeout: Duration::from_secs(5),
            idle_check: Duration::from_secs(30),
            retry_after: Duration::from_secs(5),
            important_wait: Duration::from_secs(2),
            stats_interval: Duration::from_secs(1),
            check_peer_pid: true,
            budget: budget::Rates::default(),
        }
    }
}

/// Keeps the channel running; dropping it stops the scanner and every connection.
pub struct ChannelHandle {
    /// Dropping it ends the channel's thread (and every connection task with its runtime).
    _stop: tokio::sync::oneshot::Sender<()>,
    connected: Arc<AtomicUsize>,
}

impl ChannelHandle {
    /// Connections open or being opened right now.
    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Start watching for companions on the current tokio runtime. `dir` overrides
/// the default socket directories (`gpumon --companion-dir`, tests).
pub fn spawn(dir: Option<PathBuf>, tx: Sender<Frame>) -> ChannelHandle {
    spawn_with(
        Config {
            dirs: dir.map(|d| vec![d]),
            ..Config::default()
        },
        tx,
    )
}

/// The channel runs on a thread and runtime of its own: reading and decoding
/// companion traffic then never competes with the main loop (screen, model,
/// recorder) for its thread, and a flood costs the channel's thread, where each
/// connection is held to its budget (`budget`). Frames reach the main loop
/// through `tx`, which works across runtimes.
pub fn spawn_with(cfg: Config, tx: Sender<Frame>) -> ChannelHandle {
    let connected = Arc::new(AtomicUsize::new(0));
    let c = connected.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let started = std::thread::Builder::new()
        .name("gpumon-channel".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                tokio::select! {
                    () = Scanner::new(cfg, tx, c).run() => {}
                    _ = stop_rx => {}
                }
            });
        });
    if let Err(e) = started {
        // No thread: no companions, said once; gpumon itself keeps running.
        eprintln!("gpumon: companion channel not started: {e}");
    }
    ChannelHandle {
        _stop: stop_tx,
        connected,
    }
}

/// Identity of a socket file, so a refused one is retried only once replaced.
type FileId = (u64, u64, i64);

enum Slot {
    Connected,
    RetryAt(Instant),
    RefusedUntilChanged(FileId),
}

struct Scanner {
    cfg: Config,
    fwd: forward::Forwarder,
    own_uid: u32,
    slots: HashMap<PathBuf, Slot>,
    dir_errors: HashMap<PathBuf, String>,
    connected: Arc<AtomicUsize>,
    tasks: JoinSet<(PathBuf, Outcome)>,
}

impl Scanner {
    fn new(cfg: Config, tx: Sender<Frame>, connected: Arc<AtomicUsize>) -> Self {
        let fwd = forward::Forwarder::new(tx, cfg.important_wait);
        Scanner {
            cfg,
            fwd,
            own_uid: dirs::own_uid(),
            slots: HashMap::new(),
            dir_errors: HashMap::new(),
            connected,
            tasks: JoinSet::new(),
        }
    }

    async fn run(mut self) {
        let mut tick = tokio::time::interval(self.cfg.scan_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.scan().await,
                Some(done) = self.tasks.join_next() => {
                    if let Ok((path, outcome)) = done {
                        self.finished(path, outcome);
                    }
                }
            }
        }
    }

    fn finished(&mut self, path: PathBuf, outcome: Outcome) {
        self.connected.fetch_sub(1, Ordering::Relaxed);
        let slot = match &outcome {
            Outcome::Refused(_) => match file_id(&path) {
                Some(id) => Slot::RefusedUntilChanged(id),
                None => Slot::RetryAt(Instant::now() + self.cfg.retry_after),
            },
            Outcome::Ended(_) => Slot::RetryAt(Instant::now() + self.cfg.retry_after),
            Outcome::Unreachable(_) => {
                self.unlink_if_stale(&path);
                Slot::RetryAt(Instant::now() + self.cfg.retry_after)
            }
        };
        self.slots.insert(path, slot);
    }

    /// A socket nobody listens on, of a process that no longer exists, owned by
    /// us: left behind by a crash. Removing it keeps the directory small.
    fn unlink_if_stale(&self, path: &std::path::Path) {
        let Some(pid) = path.file_name().and_then(dirs::sock_pid) else {
            return;
        };
        let ours = std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == self.own_uid);
        if ours && !dirs::pid_alive(pid) {
            // Losing a race with the companion recreating it is harmless: it rebinds.
            let _ = std::fs::remove_file(path);
        }
    }

    async fn scan(&mut self) {
        let dirs = self.cfg.dirs.clone().unwrap_or_else(dirs::scan_dirs);
        let explicit = self.cfg.dirs.is_some();
        for dir in dirs {
            let owner = match dirs::check_dir(&dir, self.own_uid) {
                Ok(o) => {
                    self.dir_errors.remove(&dir);
                    o
                }
                Err(e) => {
                    let missing = !dir.exists();
                    // Default places that do not exist are normal; say each problem once.
                    if (explicit || !missing) && self.dir_errors.get(&dir) != Some(&e) {
                        self.dir_errors.insert(dir.clone(), e.clone());
                        let text = format!("companion directory refused: {e}");
                        self.fwd
                            .status(Frame::status(
                                now_ms(),
                                StatusSource::Companion,
                                Level::Warn,
                                text,
                            ))
                            .await;
                    }
                    continue;
                }
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in rd.flatten() {
                let Some(pid) = dirs::sock_pid(&entry.file_name()) else {
                    continue;
                };
                let path = entry.path();
                // A process with both the Python companion and the interposer reports one
                // model per pid: the framework's view is the richer one, so it wins.
                let is_driver = entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.ends_with(".driver.sock"));
                if is_driver && dir.join(format!("{pid}.sock")).exists() {
                    continue;
                }
                if !self.due(&path) {
                    continue;
                }
                self.slots.insert(path.clone(), Slot::Connected);
                self.connected.fetch_add(1, Ordering::Relaxed);
                let cfg = self.cfg.clone();
                let fwd = self.fwd.clone();
                let own_uid = self.own_uid;
                self.tasks.spawn(async move {
                    let c = conn::Conn {
                        pid,
                        dir_owner: owner,
                        own_uid,
                        cfg: &cfg,
                        fwd: &fwd,
                    };
                    let outcome = c.run(&path).await;
                    (path, outcome)
                });
            }
        }
    }

    fn due(&mut self, path: &std::path::Path) -> bool {
        match self.slots.get(path) {
            None => true,
            Some(Slot::Connected) => false,
            Some(Slot::RetryAt(at)) => Instant::now() >= *at,
            Some(Slot::RefusedUntilChanged(id)) => file_id(path).is_some_and(|now| now != *id),
        }
    }
}

fn file_id(path: &std::path::Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime()))
}
