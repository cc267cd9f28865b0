//! The reporter: a plain std thread, started by the first recorded allocation,
//! that serves the protocol on `<dir>/<pid>.sock` (or `<pid>.driver.sock`).
//!
//! It owns every socket; the allocation path only touches atomics, the live
//! table and the event ring. One `poll(2)` loop with a 100 ms tick accepts
//! monitors, answers handshakes, turns queued events into `alloc` batches and
//! sends `sample`s at 2 Hz. At exit it flushes, says `bye` and removes its socket.

pub mod conn;
pub mod driver_info;
pub mod fds;
pub mod messages;
pub mod socket;

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::clock::now_ms;
use crate::devices::{DEVICES, MAX_DEVICES};
use crate::fork::{self, Handlers};
use crate::lifecycle::{self, MONITORS, guard, state};
use crate::ring::Event;
use crate::spin::SpinLock;
use crate::table::Kind;
use conn::{Conn, Incoming, Phase};
use messages::ProcInfo;

const TICK: Duration = Duration::from_millis(100);
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const HISTORY_EVERY: Duration = Duration::from_secs(1);
/// Five minutes at 1 Hz for up to four devices.
const HISTORY_CAP: usize = 1_200;
/// `alloc` messages of the live-table snapshot sent on connect (~100k allocations).
const SNAPSHOT_MESSAGES: usize = 256;
/// Connections kept at once (each is a descriptor of the CUDA program): live
/// monitors past `MAX_MONITORS` are refused, and a connection still awaiting
/// its hello is evicted (oldest first) when `MAX_PENDING` newer ones wait.
pub const MAX_MONITORS: usize = 16;
pub const MAX_PENDING: usize = 8;
/// After `accept` fails for lack of descriptors the listener is not polled for
/// this long: it stays readable, and polling it would spin a core.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// How long the fork handler waits for the reporter's lock, in yields. The
/// lock is held only to move the reporter in and out (never across socket
/// I/O), so it is free at once unless the reporter is finishing at exit.
const FORK_WAIT_SPINS: u32 = 100_000;
static FORK_LOCKED: AtomicBool = AtomicBool::new(false);
/// The reporter is out of its slot, in a tick on the reporter thread.
static TICKING: AtomicBool = AtomicBool::new(false);

static STARTED: AtomicBool = AtomicBool::new(false);
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
static ATEXIT: AtomicBool = AtomicBool::new(false);
/// The fork handlers are registered (once per process tree: a child inherits them).
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);
static REPORTER: SpinLock<Option<Reporter>> = SpinLock::new(None);

/// Starts the reporter thread once per process (and once more in a forked child).
pub fn ensure_started() {
    if STARTED.load(Ordering::Relaxed) || STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    if !FORK_HANDLERS.swap(true, Ordering::AcqRel) {
        let registered = fork::on_fork(Handlers {
            before: lock_for_fork,
            parent: unlock_in_parent,
            child: reset_in_child,
        });
        if !registered {
            lifecycle::disable(
                "pthread_atfork failed for the reporter; passing CUDA calls through unobserved",
            );
            return;
        }
    }
    let spawned = std::thread::Builder::new()
        .name("gpumon-preload".into())
        .spawn(run);
    if spawned.is_err() {
        lifecycle::disable(
            "cannot start the reporter thread; passing CUDA calls through unobserved",
        );
    }
}

fn run() {
    guard(|| match Reporter::open() {
        Ok(r) => {
            *REPORTER.lock() = Some(r);
            if !ATEXIT.swap(true, Ordering::AcqRel) {
                // SAFETY: registering a plain `extern "C"` function.
                unsafe { libc::atexit(at_exit) };
            }
        }
        Err(why) => lifecycle::disable(&why),
    });
    loop {
        if SHUTDOWN.load(Ordering::Relaxed) {
            return;
        }
        let fds = match REPORTER.lock().as_ref() {
            Some(r) => r.poll_fds(Instant::now()),
            None => return,
        };
        let mut pfds: Vec<libc::pollfd> = fds
            .iter()
            .map(|&(fd, ev)| libc::pollfd {
                fd,
                events: ev,
                revents: 0,
            })
            .collect();
        // SAFETY: `pfds` is a valid array of `pollfd` of the given length.
        unsafe {
            libc::poll(
                pfds.as_mut_ptr(),
                pfds.len() as libc::nfds_t,
                TICK.as_millis() as i32,
            )
        };
        // The reporter leaves the lock for the tick: socket reads and writes
        // happen without it, so `fork()` (whose prepare handler takes this lock)
        // and the exit handler never wait on a monitor, however it behaves.
        let taken = {
            let mut g = REPORTER.lock();
            let r = g.take();
            TICKING.store(r.is_some(), Ordering::Release);
            r
        };
        let Some(mut r) = taken else {
            return;
        };
        guard(|| r.tick(Instant::now()));
        {
            let mut g = REPORTER.lock();
            *g = Some(r);
            TICKING.store(false, Ordering::Release);
        }
        if !lifecycle::enabled() {
            return;
        }
    }
}

struct Reporter {
    listener: UnixListener,
    path: PathBuf,
    pid: u32,
    uid: u32,
    info: ProcInfo,
    hello: Option<Arc<str>>,
    conns: Vec<Conn>,
    history: VecDeque<Value>,
    next_sample: Instant,
    next_history: Instant,
    epochs: crate::epochs::Tracker,
    accept_paused_until: Option<Instant>,
}

impl Drop for Reporter {
    fn drop(&mut self) {
        fds::remove(self.listener.as_raw_fd());
    }
}

impl Reporter {
    fn open() -> Result<Reporter, String> {
        // SAFETY: plain libc queries without arguments.
        let (uid, own_pid) = unsafe { (libc::getuid(), libc::getpid() as u32) };
        let dir = socket::socket_dir(
            std::env::var_os("GPUMON_DIR"),
            std::env::var_os("XDG_RUNTIME_DIR"),
            uid,
        );
        socket::prepare_dir(&dir, uid).map_err(|e| format!("socket directory refused: {e}"))?;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let (pid, ns_pid) = socket::host_pid(&status, own_pid);
        let python = std::fs::read_link("/proc/self/exe")
            .map(|p| socket::looks_like_python(&p))
            .unwrap_or(false);
        let (listener, path) = socket::bind(&dir, pid, python)
            .map_err(|e| format!("cannot listen in {}: {e}", dir.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("socket: {e}"))?;
        fds::add(listener.as_raw_fd());
        let info = ProcInfo {
            pid,
            ns_pid,
            started: now_ms(),
            cmdline: cmdline(),
            env: std::env::vars().collect(),
            devices: Vec::new(),
            driver_version: None,
        };
        let now = Instant::now();
        Ok(Reporter {
            listener,
            path,
            pid: own_pid,
            uid,
            info,
            hello: None,
            conns: Vec::new(),
            history: VecDeque::new(),
            next_sample: now,
            next_history: now,
            epochs: crate::epochs::Tracker::default(),
            accept_paused_until: None,
        })
    }

    fn poll_fds(&self, now: Instant) -> Vec<(i32, i16)> {
        let mut v = Vec::with_capacity(self.conns.len() + 1);
        if self.accept_paused_until.is_none_or(|t| now >= t) {
            v.push((self.listener.as_raw_fd(), libc::POLLIN));
        }
        for c in &self.conns {
            let ev = if c.wants_write() {
                libc::POLLIN | libc::POLLOUT
            } else {
                libc::POLLIN
            };
            v.push((c.stream.as_raw_fd(), ev));
        }
        v
    }

    /// The hello line, built on first need: device queries wait until a
    /// monitor asks, by when the driver is surely initialised.
    fn hello_line(&mut self) -> Arc<str> {
        if let Some(h) = &self.hello {
            return Arc::clone(h);
        }
        self.info.devices = driver_info::devices();
        self.info.driver_version = driver_info::driver_version();
        let h: Arc<str> = Arc::from(messages::line(&messages::hello(&self.info)));
        self.hello = Some(Arc::clone(&h));
        h
    }

    fn tick(&mut self, now: Instant) {
        self.accept(now);
        for i in 0..self.conns.len() {
            match self.conns[i].read() {
                Incoming::Nothing => {}
                Incoming::Hello => {
                    MONITORS.fetch_add(1, Ordering::AcqRel);
                    let lines = self.greeting();
                    for l in lines {
                        self.conns[i].push(l);
                    }
                }
                Incoming::WrongVersion(lo, hi) => {
                    let l = messages::line(&messages::version_error(lo, hi));
                    self.conns[i].push(Arc::from(l));
                }
            }
        }
        self.drain_events();
        for rec in self.epochs.tick(now_ms()) {
            let l: Arc<str> = Arc::from(messages::line(&rec));
            self.broadcast(&l);
        }
        if now >= self.next_sample {
            self.next_sample = now + SAMPLE_EVERY;
            self.sample(now);
        }
        for c in &mut self.conns {
            c.flush(now);
        }
        self.conns.retain(|c| c.phase != Phase::Closed);
        let ready = self
            .conns
            .iter()
            .filter(|c| c.phase == Phase::Ready)
            .count();
        MONITORS.store(ready, Ordering::Release);
    }

    fn accept(&mut self, now: Instant) {
        if self.accept_paused_until.is_some_and(|t| now < t) {
            return;
        }
        self.accept_paused_until = None;
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    self.accept_paused_until = Some(now + ACCEPT_BACKOFF);
                    return;
                }
                Err(_) => return,
            };
            let allowed = socket::peer_uid(stream.as_raw_fd())
                .is_some_and(|peer| socket::peer_allowed(peer, self.uid));
            if !allowed || stream.set_nonblocking(true).is_err() || !self.make_room() {
                continue;
            }
            if fds::add(stream.as_raw_fd()) {
                self.conns.push(Conn::new(stream, now));
            }
        }
    }

    /// Room for one more connection: evicts the oldest still awaiting its hello
    /// when `MAX_PENDING` wait; false when `MAX_MONITORS` are live.
    fn make_room(&mut self) -> bool {
        self.conns.retain(|c| c.phase != Phase::Closed);
        let pending = self
            .conns
            .iter()
            .filter(|c| c.phase == Phase::AwaitHello)
            .count();
        if pending >= MAX_PENDING
            && let Some(i) = self.conns.iter().position(|c| c.phase == Phase::AwaitHello)
        {
            self.conns.remove(i);
        }
        let live = self.conns.len()
            - self
                .conns
                .iter()
                .filter(|c| c.phase == Phase::AwaitHello)
                .count();
        live < MAX_MONITORS
    }

    /// What a monitor gets after its hello: ours, the history, the live table.
    fn greeting(&mut self) -> Vec<Arc<str>> {
        let mut out = vec![self.hello_line()];
        let t = now_ms();
        let samples: Vec<Value> = self.history.iter().cloned().collect();
        out.extend(messages::history(&samples, t).into_iter().map(Arc::from));
        let mut per_dev: BTreeMap<usize, Vec<Event>> = BTreeMap::new();
        for (i, d) in DEVICES.iter().enumerate() {
            if d.seen.load(Ordering::Relaxed) {
                per_dev.entry(i).or_default();
            }
        }
        if let Some(s) = state() {
            for (addr, l) in s.table.snapshot() {
                if l.kind.host() {
                    continue;
                }
                per_dev.entry(usize::from(l.dev)).or_default().push(Event {
                    t_us: l.t_us,
                    addr,
                    size: l.size,
                    stream: l.stream,
                    dev: l.dev,
                    op: b'+',
                    kind: l.kind as u8,
                });
            }
            let handles: Vec<_> = s.vmm.lock().handles().collect();
            for (h, info) in handles {
                per_dev
                    .entry(usize::from(info.dev))
                    .or_default()
                    .push(Event {
                        t_us: 0,
                        addr: h,
                        size: info.size,
                        stream: 0,
                        dev: info.dev,
                        op: b'+',
                        kind: Kind::Vmm as u8,
                    });
            }
        }
        let mut budget = SNAPSHOT_MESSAGES;
        for (dev, mut evs) in per_dev {
            evs.sort_by_key(|e| e.t_us);
            let chunks: Vec<&[Event]> = if evs.is_empty() {
                vec![&[]]
            } else {
                evs.chunks(messages::OPS_PER_MESSAGE).collect()
            };
            for c in chunks {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                out.push(Arc::from(messages::line(&messages::alloc(
                    dev.min(MAX_DEVICES - 1),
                    t,
                    c,
                    true,
                ))));
            }
        }
        out
    }

    fn broadcast(&mut self, line: &Arc<str>) {
        for c in &mut self.conns {
            if c.phase == Phase::Ready {
                c.push(Arc::clone(line));
            }
        }
    }

    fn drain_events(&mut self) {
        let Some(s) = state() else { return };
        let mut per_dev: BTreeMap<u16, Vec<Event>> = BTreeMap::new();
        while let Some(e) = s.ring.pop() {
            per_dev.entry(e.dev).or_default().push(e);
        }
        if self.conns.is_empty() {
            return;
        }
        let t = now_ms();
        for (dev, evs) in per_dev {
            for c in evs.chunks(messages::OPS_PER_MESSAGE) {
                let l = Arc::from(messages::line(&messages::alloc(
                    usize::from(dev),
                    t,
                    c,
                    false,
                )));
                self.broadcast(&l);
            }
        }
    }

    fn sample(&mut self, now: Instant) {
        let started = Instant::now();
        driver_info::refresh_pools();
        let t = now_ms();
        let devs: Vec<usize> = (0..MAX_DEVICES)
            .filter(|&i| DEVICES[i].seen.load(Ordering::Relaxed))
            .collect();
        let cost = started.elapsed().as_micros() as u64;
        for &d in &devs {
            for c in &mut self.conns {
                if c.phase == Phase::Ready {
                    let l = messages::line(&messages::sample(d, t, cost, c.dropped));
                    c.push(Arc::from(l));
                }
            }
        }
        if now >= self.next_history {
            self.next_history = now + HISTORY_EVERY;
            for &d in &devs {
                if self.history.len() >= HISTORY_CAP {
                    self.history.pop_front();
                }
                self.history.push_back(messages::sample(d, t, cost, 0));
            }
        }
    }

    /// Last words at exit: pending events, `bye`, and the socket file removed.
    fn finish(&mut self) {
        self.tick(Instant::now());
        let bye: Arc<str> = Arc::from(messages::line(&messages::bye("process exit")));
        self.broadcast(&bye);
        let deadline = Instant::now() + Duration::from_millis(200);
        while Instant::now() < deadline && self.conns.iter().any(|c| c.wants_write()) {
            for c in &mut self.conns {
                c.flush(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn cmdline() -> Option<String> {
    let raw = std::fs::read("/proc/self/cmdline").ok()?;
    let parts: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

extern "C" fn at_exit() {
    guard(|| {
        SHUTDOWN.store(true, Ordering::Relaxed);
        // The reporter may be out of its slot for a tick (bounded: every socket
        // is non-blocking and reads are budgeted); wait for it, boundedly.
        let mut g = None;
        for _ in 0..10_000 {
            match REPORTER.try_lock_for(100) {
                Some(l) if l.is_some() || !TICKING.load(Ordering::Acquire) => {
                    g = Some(l);
                    break;
                }
                _ => std::thread::yield_now(),
            }
        }
        let Some(mut g) = g else {
            return;
        };
        // SAFETY: `getpid` has no preconditions.
        let me = unsafe { libc::getpid() } as u32;
        if let Some(r) = g.as_mut()
            && r.pid == me
        {
            r.finish();
        }
        *g = None;
    });
}

/// `fork` prepare: the reporter slot must not be mid-swap in the child's copy.
/// Bounded: a fork never hangs on the reporter (the lock is held only for
/// swaps, so the bound is reached only if something is badly wrong).
extern "C" fn lock_for_fork() {
    let got = REPORTER
        .try_lock_for(FORK_WAIT_SPINS)
        .map(std::mem::forget)
        .is_some();
    FORK_LOCKED.store(got, Ordering::Release);
}

/// Only after [`lock_for_fork`], in the parent or the child.
fn unlock_after_fork() {
    if FORK_LOCKED.swap(false, Ordering::AcqRel) {
        // SAFETY: `lock_for_fork` took the lock and forgot its guard.
        unsafe { REPORTER.raw_unlock() };
    }
}

extern "C" fn unlock_in_parent() {
    unlock_after_fork();
}

/// The child has no reporter thread: close its copies of the parent's sockets
/// (the parent's socket file stays) and allow a fresh start. The reporter value
/// is forgotten, not dropped: its descriptors are closed here, from the table
/// that also covers a reporter that was out of its slot at the fork.
extern "C" fn reset_in_child() {
    unlock_after_fork();
    guard(|| {
        // SAFETY: the child has a single thread: whoever held the lock in the parent
        // (if `lock_for_fork` gave up waiting) does not exist here.
        unsafe { REPORTER.raw_unlock() };
        std::mem::forget(REPORTER.lock().take());
        TICKING.store(false, Ordering::Release);
        fds::close_all_in_child();
        SHUTDOWN.store(false, Ordering::Relaxed);
        STARTED.store(false, Ordering::Release);
    });
}
