//! The companion channel, monitor side: find companions' sockets, connect,
//! check credentials, handshake, and forward their messages as frames.
//! Protocol: docs/protocol.md. The companion side is `python/gpumon`.

pub mod budget;
mod conn;
pub mod dirs;
mod forward;
mod liveness;
mod scan;
mod slots;
mod ticker;
mod verify;
mod watch;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
    /// Longest a change in the directories goes unseen where inotify cannot report it (no
    /// inotify, a directory that cannot be watched); where it can, a change is seen at once.
    pub scan_interval: Duration,
    /// Watch the directories with inotify; off, they are looked at every `scan_interval`,
    /// as where inotify cannot be had (tests of that path).
    pub watch: bool,
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
    /// Where the default places are (`dirs`; tests move them).
    pub places: dirs::Places,
}

/// Connections open or being opened at once, all users together (as many as the
/// model keeps companions), and per directory owner: a user who fills their
/// directory with sockets holds at most a quarter of them.
pub const MAX_CONNS: usize = 256;
pub const MAX_CONNS_PER_OWNER: usize = 64;

impl Default for Config {
    fn default() -> Self {
        Config {
            dirs: None,
            scan_interval: Duration::from_secs(1),
            watch: true,
            hello_timeout: Duration::from_secs(5),
            idle_check: Duration::from_secs(30),
            retry_after: Duration::from_secs(5),
            important_wait: Duration::from_secs(2),
            stats_interval: Duration::from_secs(1),
            check_peer_pid: true,
            budget: budget::Rates::default(),
            places: dirs::Places::default(),
        }
    }
}

/// Keeps the channel running; dropping it stops the scanner and every connection.
pub struct ChannelHandle {
    /// Dropping it ends the channel's thread (and every connection task with its runtime).
    _stop: tokio::sync::oneshot::Sender<()>,
    connected: Arc<AtomicUsize>,
    remembered: Arc<AtomicUsize>,
    scans: Arc<AtomicUsize>,
}

impl ChannelHandle {
    /// Scans so far, full or reusing the last: each is a wake-up of the channel's thread
    /// that did not come from a connection (tests of how seldom it wakes).
    pub fn scans(&self) -> usize {
        self.scans.load(Ordering::Relaxed)
    }

    /// Connections open or being opened right now.
    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }

    /// Socket paths the scanner remembers (bounded: docs/limits.md).
    pub fn remembered(&self) -> usize {
        self.remembered.load(Ordering::Relaxed)
    }
}

/// Start watching for companions on the current tokio runtime. `dir` overrides
/// the default socket directories (`--socket-dir`, tests).
pub fn spawn<E: From<Frame> + Send + 'static>(
    dir: Option<PathBuf>,
    tx: Sender<E>,
) -> ChannelHandle {
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
/// through `tx` (the loop's own queue: its events are made from frames), which works
/// across runtimes.
pub fn spawn_with<E: From<Frame> + Send + 'static>(cfg: Config, tx: Sender<E>) -> ChannelHandle {
    let connected = Arc::new(AtomicUsize::new(0));
    let remembered = Arc::new(AtomicUsize::new(0));
    let scans = Arc::new(AtomicUsize::new(0));
    let counters = Counters {
        connected: connected.clone(),
        remembered: remembered.clone(),
        scans: scans.clone(),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let started = std::thread::Builder::new()
        .name("gpumon-channel".into())
        .spawn(move || {
            // The blocking pool's thread reads the directories every few seconds: kept alive
            // between scans rather than made anew for each (tokio's default keeps it 10 s).
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_keep_alive(Duration::from_secs(120))
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                tokio::select! {
                    () = Scanner::new(cfg, tx, counters).run() => {}
                    _ = stop_rx => {}
                }
            });
        });
    if let Err(e) = started {
        // No thread: no companions, said once; gpumon itself keeps running.
        crate::say!("gpumon: companion channel not started: {e}");
    }
    ChannelHandle {
        _stop: stop_tx,
        connected,
        remembered,
        scans,
    }
}

/// What the handle reads of the scanner.
struct Counters {
    connected: Arc<AtomicUsize>,
    remembered: Arc<AtomicUsize>,
    scans: Arc<AtomicUsize>,
}

struct Scanner<E> {
    cfg: Config,
    fwd: forward::Forwarder<E>,
    own_uid: u32,
    slots: slots::Slots,
    dir_errors: HashMap<PathBuf, String>,
    /// Open or opening connections per directory owner (`MAX_CONNS_PER_OWNER`).
    per_owner: HashMap<u32, usize>,
    counters: Counters,
    tasks: JoinSet<(PathBuf, u32, Outcome)>,
    /// Owners of processes, kept from one scan to the next (`dirs::LiveUids`).
    uids: dirs::LiveUids,
    /// The last scan that read the directories, and when it and the last of any kind began.
    last: Option<scan::Scan>,
    last_full: Instant,
    last_scan: Instant,
    /// What reports changes in the directories, and whether it watches all of them.
    watch: watch::Watch,
    watched: bool,
    /// A change was reported too soon after the last full scan (`EVENT_GAP`).
    pending: bool,
    /// The last scan left a socket unconnected for `MAX_CONNS` or `MAX_CONNS_PER_OWNER`.
    capped: bool,
}

/// Longest a full scan is put off (or ten `scan_interval`s, if shorter): what no event
/// reports (a change inside one timestamp tick where nothing watches, a lost event) is seen
/// within it. As long as the listing of `/proc` (`dirs::UIDS_LIST_EVERY`), which a root
/// monitor makes in the same scan: a full scan is a wake-up of a second thread.
const RESCAN_EVERY: Duration = Duration::from_secs(30);
const RESCAN_SCANS: u32 = 10;
/// Least time between two full scans made for reported changes (or `scan_interval`, if
/// shorter): the first change after a quiet second is looked at at once, and a user who
/// makes and removes files without pause costs gpumon a reading of their directory a second,
/// as looking every second did, not one per change.
const EVENT_GAP: Duration = Duration::from_secs(1);

impl<E: From<Frame> + Send + 'static> Scanner<E> {
    fn new(cfg: Config, tx: Sender<E>, counters: Counters) -> Self {
        let fwd = forward::Forwarder::new(tx, cfg.important_wait);
        let now = Instant::now();
        Scanner {
            watch: watch::Watch::new(cfg.watch),
            cfg,
            fwd,
            own_uid: dirs::own_uid(),
            slots: slots::Slots::default(),
            dir_errors: HashMap::new(),
            per_owner: HashMap::new(),
            counters,
            tasks: JoinSet::new(),
            uids: dirs::LiveUids::default(),
            last: None,
            last_full: now,
            last_scan: now,
            watched: false,
            pending: false,
            capped: false,
        }
    }

    /// The thread sleeps until a scan is due (`next_scan`), a watched directory changes,
    /// or a connection ends.
    async fn run(mut self) {
        let mut alarm = ticker::Ticker::new();
        let mut set_for = None;
        loop {
            tokio::select! {
                _ = alarm.tick() => {
                    set_for = None;
                    self.due().await;
                }
                () = self.watch.changed() => self.changed().await,
                Some(done) = self.tasks.join_next() => {
                    if let Ok((path, owner, outcome)) = done {
                        self.finished(path, owner, outcome);
                    }
                }
            }
            let next = self.next_scan();
            if set_for != Some(next) {
                alarm.at(next);
                set_for = Some(next);
            }
        }
    }

    /// A root monitor without explicit directories lists `/proc` for its users.
    fn lists_proc(&self) -> bool {
        self.cfg.dirs.is_none() && self.own_uid == 0
    }

    /// `scan_interval`, as the ticker takes it: a zero one would scan without pause.
    fn interval(&self) -> Duration {
        self.cfg.scan_interval.max(Duration::from_millis(1))
    }

    fn rescan_every(&self) -> Duration {
        RESCAN_EVERY.min(self.interval().saturating_mul(RESCAN_SCANS))
    }

    fn event_gap(&self) -> Duration {
        EVENT_GAP.min(self.interval())
    }

    /// When the next scan is due without a change reported: the earliest of the full scan
    /// put off no longer (`RESCAN_EVERY`), the next listing of `/proc`, a retry, and while
    /// something is not watched or not yet connected, the next `scan_interval`.
    fn next_scan(&self) -> Instant {
        let now = Instant::now();
        let every = self.last_scan + self.interval();
        let mut next = self.last_full + self.rescan_every();
        if !self.watched || self.capped {
            next = next.min(every);
        }
        if self.pending {
            next = next.min(self.last_full + self.event_gap());
        }
        if self.lists_proc()
            && let Some(t) = self.uids.next_listing()
        {
            next = next.min(t);
        }
        // Retries wait for the next `scan_interval` as they did: a flood of companions
        // that hang up wakes the thread no more often than looking did.
        if let Some(t) = self.slots.next_retry(now) {
            next = next.min(t.max(every));
        }
        next
    }

    /// The time for a scan came: a full one if it is owed, else the last one's reading
    /// again when no directory it looked at has changed (an `lstat` each, here on the
    /// channel's thread): reading the directories on the blocking pool woke a second
    /// thread for nothing.
    async fn due(&mut self) {
        let now = Instant::now();
        let full = now >= self.last_full + self.rescan_every()
            || (self.pending && now >= self.last_full + self.event_gap())
            || (self.lists_proc() && self.uids.listing_due(now));
        match self.last.take() {
            Some(last) if !full && scan::unchanged(&last.looked) => {
                self.last_scan = now;
                self.counters.scans.fetch_add(1, Ordering::Relaxed);
                self.use_scan(&last).await;
                self.last = Some(last);
            }
            // Owed, not reported: the watches are set again too (`watch::Watch::arm`).
            _ => self.full_scan(true).await,
        }
    }

    /// A watched directory changed: look at once, unless a full scan was just made.
    async fn changed(&mut self) {
        if Instant::now() >= self.last_full + self.event_gap() {
            self.full_scan(false).await;
        } else {
            self.pending = true;
        }
    }

    fn finished(&mut self, path: PathBuf, owner: u32, outcome: Outcome) {
        self.counters.connected.fetch_sub(1, Ordering::Relaxed);
        if let Some(n) = self.per_owner.get_mut(&owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&owner);
            }
        }
        let retry = slots::Slot::RetryAt(Instant::now() + self.cfg.retry_after);
        let slot = match &outcome {
            Outcome::Refused(_) => match scan::file_id(&path) {
                Some(id) => slots::Slot::RefusedUntilChanged(id),
                None => retry,
            },
            Outcome::Ended(_) | Outcome::Absent(_) => retry,
            Outcome::Unreachable(_) => {
                self.unlink_if_stale(&path);
                retry
            }
        };
        self.slots.set(path, slot);
    }

    /// A socket nobody listens on, of a process that no longer exists, owned by us:
    /// left behind by a crash. Removing it keeps the directory small; another user's
    /// is never touched, nor one something still listens on (`Outcome::Absent`).
    fn unlink_if_stale(&self, path: &Path) {
        let Some(pid) = path.file_name().and_then(dirs::sock_pid) else {
            return;
        };
        let ours = std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == self.own_uid);
        if ours && !dirs::pid_alive(pid) {
            // Losing a race with the companion recreating it is harmless: it rebinds.
            let _ = std::fs::remove_file(path);
        }
    }

    async fn full_scan(&mut self, rearm: bool) {
        let now = Instant::now();
        // When it began, done or not: a scan that cannot be made is not tried again at once.
        self.last_full = now;
        self.last_scan = now;
        self.pending = false;
        self.counters.scans.fetch_add(1, Ordering::Relaxed);
        let explicit = self.cfg.dirs.clone();
        let places = self.cfg.places.clone();
        let own = self.own_uid;
        // Listing directories and reading /proc may take a while under a flood: it
        // runs beside the connections, never in their way.
        let mut uids = std::mem::take(&mut self.uids);
        let Ok((found, uids)) = tokio::task::spawn_blocking(move || {
            let found = scan::run(explicit, &places, own, &mut uids);
            (found, uids)
        })
        .await
        else {
            return;
        };
        self.uids = uids;
        self.use_scan(&found).await;
        self.watched = self.watch.arm(&found.looked, rearm);
        // A change made after a directory was read and before its watch was set: no event
        // tells of it, so another look is owed.
        if self.watched && !scan::unchanged(&found.looked) {
            self.pending = true;
        }
        self.last = Some(found);
    }

    async fn use_scan(&mut self, found: &scan::Scan) {
        for (dir, e) in &found.problems {
            if self.dir_errors.get(dir) != Some(e) {
                self.dir_errors.insert(dir.clone(), e.clone());
                let text = format!("companion directory refused: {}", crate::fmt::inert(e));
                self.fwd
                    .status(Frame::status(
                        now_ms(),
                        StatusSource::Companion,
                        Level::Warn,
                        text,
                    ))
                    .await;
            }
        }
        let refused: HashSet<&Path> = found.problems.iter().map(|(d, _)| d.as_path()).collect();
        self.dir_errors.retain(|d, _| refused.contains(d.as_path()));
        let seen: HashSet<&Path> = found.found.iter().map(|f| f.path.as_path()).collect();
        self.slots.keep_seen(&seen);
        let now = Instant::now();
        self.capped = false;
        for f in &found.found {
            if !self.slots.due(&f.path, f.id, now) {
                continue;
            }
            if self.tasks.len() >= MAX_CONNS {
                self.capped = true;
                break;
            }
            if self.per_owner.get(&f.dir_owner).copied().unwrap_or(0) >= MAX_CONNS_PER_OWNER {
                self.capped = true;
                continue;
            }
            self.spawn_conn(f.path.clone(), f.pid, f.dir_owner);
        }
        self.counters
            .remembered
            .store(self.slots.len(), Ordering::Relaxed);
    }

    fn spawn_conn(&mut self, path: PathBuf, pid: u32, owner: u32) {
        self.slots.set(path.clone(), slots::Slot::Connected);
        self.counters.connected.fetch_add(1, Ordering::Relaxed);
        *self.per_owner.entry(owner).or_insert(0) += 1;
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
            (path, owner, outcome)
        });
    }
}

/// Entries one scan reads from one directory (`companions_waiting` reads as few).
pub fn scan_share() -> usize {
    scan::MAX_ENTRIES_PER_DIR
}
