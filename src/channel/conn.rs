//! One connection to one companion: credentials, handshake, then a read loop
//! that turns lines into frames. Each connection is its own task, so a slow,
//! silent or hostile peer only ever costs its own task.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::model::time::now_ms;
use crate::wire::{self, Decoded, Disconnected, Line, LineSplitter, LinkStats, Message, Reject};

use super::Config;
use super::budget::Budget;
use super::dirs::{peer_allowed, pid_alive};
use super::forward::Forwarder;
use super::{liveness, verify};
use crate::model::frame::CompanionFrame;

/// A socket file younger than this that refuses a connection is tried again every
/// `FRESH_RETRY` (`Conn::connect`): at most 20 tries, then the scanner's `retry_after`.
const FRESH: Duration = Duration::from_secs(1);
const FRESH_RETRY: Duration = Duration::from_millis(50);

/// Whether the checked socket file was made less than `FRESH` ago.
fn fresh(checked: &verify::Checked) -> bool {
    std::fs::metadata(checked.connect_path())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < FRESH)
}

/// After this many refused lines the peer is broken or hostile: hang up.
pub const MAX_REJECTS: u64 = 1_000;
/// A line still without its newline after this many bytes (64 line limits),
/// or this many blank lines in a row, is a hostile or broken peer too: neither
/// would ever be counted as a refused line, and both burned a core before.
pub(super) const MAX_ENDLESS_BYTES: usize = 64 * wire::MAX_MESSAGE_LINE;
pub(super) const MAX_BLANK_RUN: u64 = 100_000;

/// How a connection ended, which decides when the scanner tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing listens (stale socket) or connect failed.
    Unreachable(String),
    /// No process has the pid, yet something listens there (a listener that outlived
    /// its process, or one in a pid namespace gpumon cannot see): left alone.
    Absent(String),
    /// Refused for credentials or version: retried only once the socket file changes.
    Refused(String),
    /// Was connected; ended normally or by error.
    Ended(String),
}

pub(crate) struct Conn<'a, E> {
    pub pid: u32,
    pub dir_owner: u32,
    pub own_uid: u32,
    pub cfg: &'a Config,
    pub fwd: &'a Forwarder<E>,
}

impl<E: From<Frame> + Send + 'static> Conn<'_, E> {
    async fn status(&self, level: Level, text: String) {
        self.fwd
            .status(Frame::status(
                now_ms(),
                StatusSource::Companion,
                level,
                text,
            ))
            .await;
    }

    async fn emit(&self, msg: Message) -> u64 {
        self.fwd
            .send(CompanionFrame {
                t: now_ms(),
                pid: self.pid,
                msg,
            })
            .await
    }

    async fn refuse(&self, why: String) -> Outcome {
        let text = format!("companion {} refused: {why}", self.pid);
        self.status(Level::Warn, text.clone()).await;
        Outcome::Refused(text)
    }

    /// The socket's pid has no process. Only a file of this user's that the kernel
    /// refuses to connect to is stale (the scanner removes it); the probe sends nothing.
    /// Anything else is never connected to, and never removed.
    async fn absent(&self, path: &Path, checked: &verify::Checked) -> Outcome {
        use std::os::unix::fs::MetadataExt;
        let why = format!("no process {}", self.pid);
        let ours = std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == self.own_uid);
        if !ours {
            return Outcome::Absent(why);
        }
        let probe = UnixStream::connect(checked.connect_path());
        match tokio::time::timeout(std::time::Duration::from_millis(200), probe).await {
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                Outcome::Unreachable(why)
            }
            _ => Outcome::Absent(why),
        }
    }

    /// Connect within `hello_timeout`. A socket file made a moment ago may be bound and not
    /// listen yet: the scanner, woken by its creation (`watch`), comes between a companion's
    /// `bind` and `listen`, and a refusal then would leave it unseen for `retry_after`.
    async fn connect(&self, checked: &verify::Checked) -> Result<UnixStream, Outcome> {
        let deadline = tokio::time::Instant::now() + self.cfg.hello_timeout;
        loop {
            let connect = UnixStream::connect(checked.connect_path());
            match tokio::time::timeout_at(deadline, connect).await {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e))
                    if e.kind() == std::io::ErrorKind::ConnectionRefused && fresh(checked) =>
                {
                    tokio::time::sleep(FRESH_RETRY).await;
                }
                // The listen backlog is full (a pile of connections from a hostile peer
                // of the same user): the companion drops idle ones, so room comes.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    tokio::time::sleep(FRESH_RETRY).await;
                }
                Ok(Err(e)) => return Err(Outcome::Unreachable(e.to_string())),
                Err(_) => return Err(Outcome::Unreachable("connect timed out".into())),
            }
        }
    }

    pub(crate) async fn run(&self, path: &Path) -> Outcome {
        // Nothing is written to, or believed from, a socket before it is verified
        // (`verify`): the file, then the process behind it.
        let checked = match verify::check_file(path, self.dir_owner, self.own_uid) {
            Ok(c) => c,
            Err(verify::FileProblem::Gone(e)) => return Outcome::Unreachable(e),
            Err(verify::FileProblem::Refused(e)) => return self.refuse(e).await,
        };
        if self.cfg.check_peer_pid {
            // A socket whose pid has no process is stale or outlived its listener: never
            // connected to (the scanner removes it when it is ours).
            match liveness::started_before(self.pid, checked.fd()) {
                Ok(()) => {}
                Err(liveness::NotAlive::NoProcess) => return self.absent(path, &checked).await,
                Err(liveness::NotAlive::Refused(e)) => return self.refuse(e).await,
            }
        }
        let stream = match self.connect(&checked).await {
            Ok(s) => s,
            Err(outcome) => return outcome,
        };
        drop(checked);
        let (peer, peer_pid) = match stream.peer_cred() {
            Ok(c) => (c.uid(), c.pid()),
            Err(e) => return Outcome::Unreachable(format!("peer credentials: {e}")),
        };
        if !peer_allowed(self.own_uid, peer, self.dir_owner) {
            return self
                .refuse(format!(
                    "its socket belongs to uid {peer}, not to this user"
                ))
                .await;
        }
        if self.cfg.check_peer_pid
            && let Err(e) = verify::pid_rule(self.pid, peer_pid)
        {
            return self.refuse(format!("its socket {e}")).await;
        }
        let (mut rd, mut wr) = stream.into_split();
        if let Err(e) = wr.write_all(wire::monitor_hello().as_bytes()).await {
            return Outcome::Unreachable(format!("hello: {e}"));
        }
        // The write half stays open (dropping it would half-close the stream):
        // the protocol reserves monitor → companion requests.
        let _keep = wr;
        let mut reader = Reader::default();

        let hello = match self.handshake(&mut rd, &mut reader).await {
            Ok(h) => h,
            Err(o) => return o,
        };
        // The peer has answered, so it has accepted: its end is in someone's descriptors.
        if self.cfg.check_peer_pid {
            let fd = rd.as_ref().as_fd();
            match liveness::holds_our_peer(self.pid, fd, self.own_uid, path) {
                Ok(()) => {}
                Err(liveness::NotAlive::NoProcess) => {
                    return Outcome::Absent(format!("no process {}", self.pid));
                }
                Err(liveness::NotAlive::Refused(e)) => return self.refuse(e).await,
            }
        }
        let what = hello_summary(&hello);
        self.emit(Message::Hello(hello)).await;
        self.status(
            Level::Info,
            format!("companion {} connected ({what})", self.pid),
        )
        .await;
        let reason = self.stream(&mut rd, &mut reader).await;
        self.emit(Message::Disconnected(Disconnected {
            reason: reason.clone(),
        }))
        .await;
        Outcome::Ended(reason)
    }

    async fn handshake(
        &self,
        rd: &mut tokio::net::unix::OwnedReadHalf,
        reader: &mut Reader,
    ) -> Result<wire::Hello, Outcome> {
        let deadline = tokio::time::Instant::now() + self.cfg.hello_timeout;
        loop {
            if let Some(item) = reader.next() {
                match item {
                    Ok(Decoded::Msg(m)) => match *m {
                        Message::Hello(h) => return Ok(h),
                        Message::Error(e) => {
                            let text = format!("companion {} refused: {}", self.pid, e.text);
                            self.status(Level::Error, text.clone()).await;
                            return Err(Outcome::Refused(text));
                        }
                        _ => reader.stats.rejected += 1,
                    },
                    Err(Reject::Version(v)) => {
                        let text = format!(
                            "companion {} too new: v{v}; this gpumon speaks v{}",
                            self.pid,
                            wire::VERSION
                        );
                        self.status(Level::Error, text.clone()).await;
                        return Err(Outcome::Refused(text));
                    }
                    Ok(Decoded::Unknown(_)) | Err(_) => {}
                }
                if reader.rejects() > MAX_REJECTS {
                    return Err(Outcome::Refused("garbage instead of a hello".into()));
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, reader.fill(rd)).await {
                Err(_) => {
                    let text = format!("companion {} sent no hello in time", self.pid);
                    self.status(Level::Warn, text.clone()).await;
                    return Err(Outcome::Refused(text));
                }
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return Err(Outcome::Unreachable("closed before hello".into())),
                Ok(Err(e)) => return Err(Outcome::Unreachable(e.to_string())),
            }
        }
    }

    /// Forward everything until the peer goes; returns why it went.
    async fn stream(
        &self,
        rd: &mut tokio::net::unix::OwnedReadHalf,
        reader: &mut Reader,
    ) -> String {
        let mut bye: Option<String> = None;
        let mut sent_stats = LinkStats::default();
        let mut last_stats = Instant::now();
        let mut last_data = Instant::now();
        let mut budget = Budget::new(self.cfg.budget, Instant::now());
        let mut said_over = false;
        loop {
            while let Some(item) = reader.next() {
                match item {
                    Ok(Decoded::Msg(m)) => {
                        budget.spend_msg();
                        let rule = m.rule();
                        if rule.class == wire::Class::Important
                            && !budget.take_important(rule.lane, Instant::now())
                        {
                            reader.stats.over_budget += 1;
                            self.say_over_budget(&mut said_over).await;
                            continue;
                        }
                        if let Message::Bye(b) = &*m {
                            bye = Some(b.reason.clone().unwrap_or_else(|| "bye".into()));
                        }
                        reader.stats.dropped += self.emit(*m).await;
                    }
                    Ok(Decoded::Unknown(_)) | Err(_) => {}
                }
            }
            let endless = reader
                .split
                .skipping()
                .is_some_and(|n| n > MAX_ENDLESS_BYTES);
            if reader.rejects() > MAX_REJECTS || endless || reader.blank_run > MAX_BLANK_RUN {
                let what = if endless {
                    format!("a line of over {MAX_ENDLESS_BYTES} bytes without end")
                } else if reader.blank_run > MAX_BLANK_RUN {
                    format!("{MAX_BLANK_RUN} blank lines")
                } else {
                    format!("{MAX_REJECTS} bad lines")
                };
                self.status(
                    Level::Warn,
                    format!(
                        "companion {}: {what}, closing (hostile or broken peer)",
                        self.pid
                    ),
                )
                .await;
                self.send_stats(&reader.stats, &mut sent_stats).await;
                return "hostile or broken peer".into();
            }
            if reader.stats != sent_stats && last_stats.elapsed() >= self.cfg.stats_interval {
                self.send_stats(&reader.stats, &mut sent_stats).await;
                last_stats = Instant::now();
            }
            let wait = budget.wait(Instant::now());
            if !wait.is_zero() {
                // Over budget: leave the flood in the peer's socket for a while.
                self.say_over_budget(&mut said_over).await;
                let wait = wait.min(self.cfg.stats_interval);
                reader.stats.throttled_ms += u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                tokio::time::sleep(wait).await;
                continue;
            }
            match tokio::time::timeout(self.cfg.stats_interval, reader.fill(rd)).await {
                Ok(Ok(true)) => {
                    budget.spend_bytes(reader.last_read);
                    last_data = Instant::now();
                }
                Ok(Ok(false)) => {
                    self.send_stats(&reader.stats, &mut sent_stats).await;
                    return bye.unwrap_or_else(|| "connection closed".into());
                }
                Ok(Err(e)) => return format!("read error: {e}"),
                Err(_) => {
                    // Silence is normal (no framework yet); a vanished process is not.
                    if last_data.elapsed() >= self.cfg.idle_check && !pid_alive(self.pid) {
                        return "process gone".into();
                    }
                }
            }
        }
    }

    async fn say_over_budget(&self, said: &mut bool) {
        if std::mem::replace(said, true) {
            return;
        }
        let r = self.cfg.budget;
        let text = format!(
            "companion {} sends more than its budget ({:.0} messages/s, {:.0} MiB/s, {:.0} a second of each of epochs, markers, events): read slower, the excess of a kind dropped (counted)",
            self.pid,
            r.msgs_per_s,
            r.bytes_per_s / (1024.0 * 1024.0),
            r.important_per_s
        );
        self.status(Level::Warn, text).await;
    }

    async fn send_stats(&self, now: &LinkStats, sent: &mut LinkStats) {
        if now != sent {
            *sent = now.clone();
            self.emit(Message::Link(now.clone())).await;
        }
    }
}

fn hello_summary(h: &wire::Hello) -> String {
    let fw = h
        .framework
        .as_ref()
        .map_or("no framework yet", |f| f.as_str());
    match &h.framework_version {
        Some(v) => format!("{} {fw} {v}", h.role),
        None => format!("{} {fw}", h.role),
    }
}

/// Bytes in, decoded lines out, with the counters of what was refused.
#[derive(Default)]
struct Reader {
    split: LineSplitter,
    lines: std::collections::VecDeque<Line>,
    stats: LinkStats,
    buf: Vec<u8>,
    /// Bytes of the last `fill`, for the byte budget.
    last_read: usize,
    /// Blank lines since the last non-blank one.
    blank_run: u64,
}

impl Reader {
    fn rejects(&self) -> u64 {
        self.stats.rejected + self.stats.oversize + self.stats.unknown
    }

    /// Read once; false at end of stream.
    async fn fill(&mut self, rd: &mut tokio::net::unix::OwnedReadHalf) -> std::io::Result<bool> {
        if self.buf.is_empty() {
            self.buf = vec![0; 16 * 1024];
        }
        let n = rd.read(&mut self.buf).await?;
        self.last_read = n;
        if n == 0 {
            return Ok(false);
        }
        let mut out = Vec::new();
        self.split.feed(&self.buf[..n], &mut out);
        self.lines.extend(out);
        Ok(true)
    }

    /// Next decoded line; refused lines are counted here and returned as errors.
    fn next(&mut self) -> Option<Result<Decoded, Reject>> {
        let r = loop {
            match self.lines.pop_front()? {
                Line::Oversize(n) => break Err(Reject::Oversize(n)),
                // Blank lines are keep-alives at most; skipping them needs no count.
                Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {
                    self.blank_run += 1;
                    continue;
                }
                Line::Text(t) => {
                    self.blank_run = 0;
                    break wire::decode_line(&t);
                }
            }
        };
        match &r {
            Err(Reject::Oversize(_)) => self.stats.oversize += 1,
            Err(_) => self.stats.rejected += 1,
            Ok(Decoded::Unknown(_)) => self.stats.unknown += 1,
            Ok(Decoded::Msg(_)) => {}
        }
        Some(r)
    }
}
