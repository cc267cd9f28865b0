//! Replay: re-emits a recording's frames with their original timing (scaled),
//! through the same event channel as live sources. Seeking back rebuilds the
//! model by re-reading the file, so memory stays bounded for any file size.

use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::Sender;

use crate::event::{Event, ReplayStatus, Speed};
use crate::frame::{Frame, Level};
use crate::model::time::Ts;
use crate::record::{Next, Reader, RecordingError};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    TogglePause,
    SetSpeed(Speed),
    /// Move the replay position by this many milliseconds of recorded time.
    Seek(i64),
    ToEnd,
}

pub struct ReplayHandle {
    pub control: std_mpsc::Sender<Control>,
}

pub struct Options {
    pub path: PathBuf,
    pub speed: Speed,
    pub follow: bool,
    /// Start this far into the recording (the demo opens with history already on screen).
    pub skip_ms: i64,
}

/// Start the replay thread. The file is opened (and its header checked) before returning.
pub fn spawn(opts: Options, tx: Sender<Event>) -> Result<ReplayHandle, RecordingError> {
    let reader = Reader::open(&opts.path)?;
    let (ctl_tx, ctl_rx) = std_mpsc::channel();
    thread::Builder::new()
        .name("replay".into())
        .spawn(move || {
            let mut r = Replay::new(reader, opts, tx);
            if let Err(e) = r.run(&ctl_rx) {
                let _ = r.tx.blocking_send(Event::Frame(Frame::status(
                    r.pos,
                    "replay",
                    Level::Error,
                    e.to_string(),
                )));
            }
        })
        .map_err(|source| RecordingError::Open {
            path: PathBuf::new(),
            err: source,
        })?;
    Ok(ReplayHandle { control: ctl_tx })
}

struct Replay {
    reader: Reader,
    path: PathBuf,
    tx: Sender<Event>,
    speed: Speed,
    follow: bool,
    paused: bool,
    pos: Ts,
    start: Ts,
    pending: Option<Frame>,
    ended: bool,
    last_t: Ts,
}

impl Replay {
    fn new(reader: Reader, opts: Options, tx: Sender<Event>) -> Replay {
        let start = reader.header.started;
        Replay {
            reader,
            path: opts.path,
            tx,
            speed: opts.speed,
            follow: opts.follow,
            paused: false,
            pos: start + opts.skip_ms.max(0),
            start,
            pending: None,
            ended: false,
            last_t: start,
        }
    }

    fn send(&self, e: Event) -> bool {
        self.tx.blocking_send(e).is_ok()
    }

    fn status(&self) -> Event {
        Event::Replay(ReplayStatus {
            pos: self.pos,
            start: self.start,
            speed: self.speed,
            paused: self.paused,
            ended: self.ended,
            following: self.follow,
        })
    }

    fn run(&mut self, ctl: &std_mpsc::Receiver<Control>) -> Result<(), RecordingError> {
        if !self.send(Event::Frame(Frame::Header(self.reader.header.clone()))) {
            return Ok(());
        }
        let mut last = Instant::now();
        let mut last_status = Instant::now() - Duration::from_secs(1);
        loop {
            while let Ok(c) = ctl.try_recv() {
                self.control(c)?;
            }
            let now = Instant::now();
            let elapsed = now - last;
            last = now;
            if !self.paused {
                match self.speed {
                    Speed::Times(x) => self.pos += (elapsed.as_secs_f64() * 1000.0 * x) as i64,
                    Speed::Max => self.pos = Ts::MAX,
                }
            }
            let sent = self.emit_due()?;
            if sent.is_none() {
                return Ok(());
            }
            if last_status.elapsed() >= Duration::from_millis(200) || sent == Some(true) {
                if !self.send(self.status()) {
                    return Ok(());
                }
                last_status = Instant::now();
            }
            if self.ended && !self.follow {
                // Keep serving controls (seek back) until the UI goes away.
                match ctl.recv_timeout(Duration::from_millis(250)) {
                    Ok(c) => self.control(c)?,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {
                        if self.tx.is_closed() {
                            return Ok(());
                        }
                    }
                }
                continue;
            }
            thread::sleep(Duration::from_millis(if self.ended { 250 } else { 20 }));
        }
    }

    /// Send every frame at or before `pos`. Returns None when the UI has gone away,
    /// Some(true) when the end was reached just now.
    fn emit_due(&mut self) -> Result<Option<bool>, RecordingError> {
        loop {
            let f = match self.pending.take() {
                Some(f) => f,
                None => match self.reader.next()? {
                    Next::Frame(f) => f,
                    Next::End { .. } => {
                        let just = !self.ended;
                        self.ended = true;
                        if self.pos == Ts::MAX {
                            self.pos = self.last_t;
                        }
                        return Ok(Some(just));
                    }
                },
            };
            self.ended = false;
            if f.time() > self.pos {
                self.pending = Some(f);
                return Ok(Some(false));
            }
            self.last_t = self.last_t.max(f.time());
            if !self.send(Event::Frame(f)) {
                return Ok(None);
            }
        }
    }

    fn control(&mut self, c: Control) -> Result<(), RecordingError> {
        match c {
            Control::TogglePause => self.paused = !self.paused,
            Control::SetSpeed(s) => self.speed = s,
            Control::ToEnd => self.pos = Ts::MAX,
            Control::Seek(d) if d >= 0 && self.pos == Ts::MAX => {}
            Control::Seek(d) if d >= 0 => self.pos = self.pos.saturating_add(d),
            Control::Seek(d) => {
                let target = (self.pos + d).max(self.start);
                self.reader = Reader::open(&self.path)?;
                self.pending = None;
                self.ended = false;
                self.pos = target;
                self.last_t = self.start;
                let _ = self.send(Event::Reset);
                let _ = self.send(Event::Frame(Frame::Header(self.reader.header.clone())));
            }
        }
        Ok(())
    }
}
