//! One monitor connection: handshake, bounded outgoing queue, stall limits.
//! Sockets are non-blocking; nothing here ever waits.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::messages::check_monitor_hello;
use crate::protocol::MAX_MESSAGE_LINE;

/// Outgoing messages kept per monitor; the oldest go first when it stalls.
pub const QUEUE: usize = 1_024;
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read from one monitor per reporter tick (10 per second).
pub const READ_BUDGET: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    AwaitHello,
    Ready,
    Closed,
}

/// What reading found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Nothing,
    /// A valid monitor hello: send ours, the history and the live table.
    Hello,
    /// A hello for versions we do not speak: answer with an error and close.
    WrongVersion(u64, u64),
}

pub struct Conn {
    pub stream: UnixStream,
    pub phase: Phase,
    opened: Instant,
    inbuf: Vec<u8>,
    skipping: bool,
    out: VecDeque<Arc<str>>,
    partial: Option<(Arc<str>, usize)>,
    pub dropped: u64,
    last_progress: Instant,
    /// Close once the queue has drained (after a version error).
    close_when_flushed: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        super::fds::remove(std::os::unix::io::AsRawFd::as_raw_fd(&self.stream));
    }
}

impl Conn {
    pub fn new(stream: UnixStream, now: Instant) -> Self {
        Self {
            stream,
            phase: Phase::AwaitHello,
            opened: now,
            inbuf: Vec::new(),
            skipping: false,
            out: VecDeque::new(),
            partial: None,
            dropped: 0,
            last_progress: now,
            close_when_flushed: false,
        }
    }

    pub fn push(&mut self, line: Arc<str>) {
        if self.phase == Phase::Closed {
            return;
        }
        if self.out.is_empty() && self.partial.is_none() {
            // Nothing was pending: the stall clock starts now.
            self.last_progress = Instant::now();
        }
        if self.out.len() >= QUEUE {
            self.out.pop_front();
            self.dropped += 1;
        }
        self.out.push_back(line);
    }

    pub fn close_after_flush(&mut self) {
        self.close_when_flushed = true;
    }

    pub fn wants_write(&self) -> bool {
        self.partial.is_some() || !self.out.is_empty()
    }

    /// Reads what is available, at most `READ_BUDGET` bytes per call so a
    /// flooding peer cannot keep the reporter here. Only the first line (the
    /// hello) matters; later lines are read and ignored so the peer never
    /// blocks on us.
    pub fn read(&mut self) -> Incoming {
        let mut buf = [0u8; 4096];
        let mut result = Incoming::Nothing;
        for _ in 0..READ_BUDGET / buf.len() {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.phase = Phase::Closed;
                    return result;
                }
                Ok(n) => {
                    for &b in &buf[..n] {
                        if b == b'\n' {
                            let line = std::mem::take(&mut self.inbuf);
                            let was_skipping = std::mem::replace(&mut self.skipping, false);
                            if self.phase == Phase::AwaitHello && !was_skipping {
                                result = self.on_first_line(&line);
                            }
                        } else if !self.skipping {
                            self.inbuf.push(b);
                            if self.inbuf.len() >= MAX_MESSAGE_LINE {
                                self.inbuf.clear();
                                self.skipping = true;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return result,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.phase = Phase::Closed;
                    return result;
                }
            }
        }
        result
    }

    fn on_first_line(&mut self, line: &[u8]) -> Incoming {
        let text = String::from_utf8_lossy(line);
        match check_monitor_hello(&text) {
            Ok(()) => {
                self.phase = Phase::Ready;
                Incoming::Hello
            }
            Err(Some((lo, hi))) => {
                self.phase = Phase::Ready;
                self.close_after_flush();
                Incoming::WrongVersion(lo, hi)
            }
            Err(None) => {
                // Not a monitor: close without a byte sent, as for a wrong uid.
                self.phase = Phase::Closed;
                Incoming::Nothing
            }
        }
    }

    /// Writes what the socket takes now; enforces the hello and stall limits.
    pub fn flush(&mut self, now: Instant) {
        if self.phase == Phase::AwaitHello && now.duration_since(self.opened) > HELLO_TIMEOUT {
            self.phase = Phase::Closed;
            return;
        }
        loop {
            if self.partial.is_none() {
                match self.out.pop_front() {
                    Some(l) => self.partial = Some((l, 0)),
                    None => break,
                }
            }
            let Some((line, off)) = self.partial.as_mut() else {
                break;
            };
            match self.stream.write(&line.as_bytes()[*off..]) {
                Ok(0) => {
                    self.phase = Phase::Closed;
                    return;
                }
                Ok(n) => {
                    *off += n;
                    self.last_progress = now;
                    if *off >= line.len() {
                        self.partial = None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.phase = Phase::Closed;
                    return;
                }
            }
        }
        let stalled = self.wants_write() && now.duration_since(self.last_progress) > STALL_TIMEOUT;
        let done = !self.wants_write() && self.close_when_flushed;
        if stalled || done {
            self.phase = Phase::Closed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    fn pair() -> (Conn, UnixStream) {
        let (a, b) = UnixStream::pair().expect("pair");
        a.set_nonblocking(true).expect("nonblocking");
        (Conn::new(a, Instant::now()), b)
    }

    #[test]
    fn hello_then_lines_flow() {
        let (mut c, mut peer) = pair();
        assert_eq!(c.read(), Incoming::Nothing);
        peer.write_all(br#"{"v":1,"type":"hello","role":"monitor","min_v":1,"max_v":1}"#)
            .expect("write");
        peer.write_all(b"\n{\"type\":\"request\"}\n")
            .expect("write");
        assert_eq!(c.read(), Incoming::Hello);
        assert_eq!(c.phase, Phase::Ready);
        c.push(Arc::from("{\"type\":\"bye\"}\n"));
        c.flush(Instant::now());
        let mut r = std::io::BufReader::new(peer);
        let mut l = String::new();
        r.read_line(&mut l).expect("read");
        assert_eq!(l, "{\"type\":\"bye\"}\n");
    }

    #[test]
    fn wrong_version_is_answered_then_closed() {
        let (mut c, mut peer) = pair();
        peer.write_all(b"{\"v\":2,\"type\":\"hello\",\"min_v\":2,\"max_v\":2}\n")
            .expect("write");
        assert_eq!(c.read(), Incoming::WrongVersion(2, 2));
        c.push(Arc::from("err\n"));
        c.flush(Instant::now());
        assert_eq!(c.phase, Phase::Closed);
    }

    #[test]
    fn non_monitors_and_silent_peers_are_dropped() {
        let (mut c, mut peer) = pair();
        peer.write_all(b"GET / HTTP/1.0\n").expect("write");
        c.read();
        assert_eq!(c.phase, Phase::Closed);
        let (mut quiet, _p) = pair();
        quiet.flush(Instant::now() + HELLO_TIMEOUT + Duration::from_millis(1));
        assert_eq!(quiet.phase, Phase::Closed);
    }

    #[test]
    fn queue_is_bounded_and_counts_drops() {
        let (mut c, _peer) = pair();
        c.phase = Phase::Ready;
        for i in 0..QUEUE + 10 {
            c.push(Arc::from(format!("{i}\n")));
        }
        assert_eq!(c.dropped, 10);
        assert_eq!(c.out.len(), QUEUE);
    }

    #[test]
    fn a_stalled_monitor_is_disconnected() {
        let (mut c, _peer) = pair();
        c.phase = Phase::Ready;
        let big: Arc<str> = Arc::from("x".repeat(60_000) + "\n");
        let start = Instant::now();
        for _ in 0..200 {
            c.push(Arc::clone(&big));
        }
        c.flush(start);
        assert_eq!(c.phase, Phase::Ready);
        c.flush(start + STALL_TIMEOUT + Duration::from_secs(1));
        assert_eq!(c.phase, Phase::Closed);
    }

    #[test]
    fn an_oversize_first_line_is_not_a_hello() {
        let (mut c, mut peer) = pair();
        // A socketpair buffers far more than one line, so plain writes suffice.
        peer.write_all(&vec![b'a'; MAX_MESSAGE_LINE + 10])
            .expect("write");
        peer.write_all(b"\n").expect("write");
        c.read();
        assert_eq!(c.phase, Phase::AwaitHello);
        assert!(c.inbuf.is_empty());
    }
}
