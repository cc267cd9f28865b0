//! Replay: re-emits a recording's frames with their original timing (scaled),
//! through the same event channel as live sources. Seeking back rebuilds the
//! model by re-reading the file, so memory stays bounded for any file size.

use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::Sender;

use crate::model::frame::{Frame, Level};
use crate::model::named::StatusSource;
use crate::model::time::Ts;
use crate::record::{Next, Reader, RecordingError};
pub use crate::source::speed::Speed;

/// What a replay tells whoever plays it; the runner wraps these in its own events, as it
/// does NVML's frames.
// Sent one at a time through a bounded channel, never stored in bulk: a box would cost
// an allocation per frame for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ReplayEvent {
    Frame(Frame),
    /// Replay jumped backwards: the model is rebuilt from the frames that follow.
    Reset,
    /// Where the replay stands, for the status line.
    Status(ReplayStatus),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayStatus {
    pub pos: Ts,
    pub start: Ts,
    /// Time of the recording's last frame, once the file has been scanned (`None` while
    /// scanning, or when following a growing file).
    pub end: Option<Ts>,
    pub speed: Speed,
    pub paused: bool,
    /// The whole file has been read (and we are not following it).
    pub ended: bool,
    pub following: bool,
    /// At the end, start again from the beginning.
    pub looping: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    TogglePause,
    SetSpeed(Speed),
    /// Move the replay position by this many milliseconds of recorded time.
    Seek(i64),
    /// Go to this recorded time (back: the model is rebuilt).
    SeekTo(Ts),
    /// To the next (1) or previous (-1) alert or epoch mark of the recording.
    Mark(i32),
    ToEnd,
    ToggleLoop,
}

/// What one pass over the file tells the controls: its length and where its alerts and
/// epoch ends are, so `}` can go forward to a mark the model has not seen yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    pub end: Ts,
    /// Times alerts were raised or worsened, sorted, at least a second apart.
    pub alerts: Vec<Ts>,
    /// Epoch ends (companion `epoch` messages), sorted, at least a second apart.
    pub epochs: Vec<Ts>,
}

impl Scan {
    /// The mark `}` (dir > 0) or `{` goes to from `pos`: the next (previous) alert, or the
    /// next epoch end when no alert lies that way. Alerts first: in a run with an epoch
    /// every few seconds they would otherwise be out of reach. A little room around `pos`
    /// lets a second press move on instead of finding the mark the first one landed on.
    pub fn mark(&self, pos: Ts, dir: i32) -> Option<Ts> {
        let pick = |v: &[Ts]| {
            if dir > 0 {
                v.iter().find(|&&m| m > pos + 500).copied()
            } else {
                v.iter().rev().find(|&&m| m < pos - 1_500).copied()
            }
        };
        pick(&self.alerts).or_else(|| pick(&self.epochs))
    }
}

/// Read the whole recording once (on its own thread: a long file must not delay playback).
pub fn scan(path: &Path) -> Result<Scan, RecordingError> {
    use crate::model::alerts::ChangeKind;
    let mut r = Reader::open(path)?;
    let mut s = Scan {
        end: r.header.started,
        ..Scan::default()
    };
    loop {
        let f = match r.next() {
            Ok(Next::Frame(f)) => f,
            Ok(Next::End { .. }) => break,
            // The player stops there and says why; the marks before it stand.
            Err(RecordingError::CorruptCompressed { .. }) => break,
            Err(e) => return Err(e),
        };
        s.end = s.end.max(f.time());
        match &f {
            Frame::Alert(a) if matches!(a.change, ChangeKind::Raised | ChangeKind::Worsened) => {
                s.alerts.push(f.time())
            }
            Frame::Companion(c) if matches!(c.msg, crate::wire::Message::Epoch(_)) => {
                s.epochs.push(f.time())
            }
            _ => {}
        }
    }
    for v in [&mut s.alerts, &mut s.epochs] {
        v.sort_unstable();
        v.dedup_by(|b, a| *b - *a < 1_000);
    }
    Ok(s)
}

/// Where a replay opens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpenAt {
    /// At the recording's first frame (headless runs and reports: time does not matter).
    Start,
    /// This far into the recording (the demo opens with history already on screen).
    After(i64),
    /// Where the first process shows: a recording made before the job started would
    /// otherwise open on an empty card for as long as the job took to load.
    FirstData,
}

/// How far `OpenAt::FirstData` looks for a process before opening at the start: an idle
/// recording is not read to its end before it plays.
const FIRST_DATA_HORIZON_MS: i64 = 10 * 60_000;

/// Whether a frame shows something of a process: a GPU listing one, its /proc facts, its
/// companion, an alert about it. Idle ticks and notes do not.
fn shows_data(f: &Frame) -> bool {
    match f {
        Frame::Tick(t) => t.gpus.iter().any(|g| !g.procs.is_empty()),
        Frame::Procs { .. } | Frame::Companion(_) | Frame::Alert(_) => true,
        Frame::Header(_) | Frame::Status { .. } => false,
    }
}

/// The time of the first frame that `shows_data`, if one comes within the horizon.
pub fn first_data(path: &Path) -> Result<Option<Ts>, RecordingError> {
    let mut r = Reader::open(path)?;
    let horizon = r.header.started.saturating_add(FIRST_DATA_HORIZON_MS);
    loop {
        match r.next() {
            Ok(Next::Frame(f)) if f.time() > horizon => return Ok(None),
            Ok(Next::Frame(f)) if shows_data(&f) => return Ok(Some(f.time())),
            Ok(Next::Frame(_)) => {}
            Ok(Next::End { .. }) | Err(RecordingError::CorruptCompressed { .. }) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
}

pub struct ReplayHandle {
    pub control: std_mpsc::Sender<Control>,
}

pub struct Options {
    pub path: PathBuf,
    pub speed: Speed,
    pub follow: bool,
    /// Where playback opens; the frames before it are sent at once, as history.
    pub open_at: OpenAt,
    /// Start again from the beginning at the end (`L` toggles).
    pub looping: bool,
    /// A user drives it (TUI): scan the file for its length and marks. Headless runs skip
    /// the extra pass.
    pub controls: bool,
    /// Stop at the first corrupt line (`--strict`) instead of skipping it with a warning.
    pub strict: bool,
}

/// Start the replay thread. The file is opened (and its header checked) before returning.
pub fn spawn<E>(opts: Options, tx: Sender<E>) -> Result<ReplayHandle, RecordingError>
where
    E: From<ReplayEvent> + Send + 'static,
{
    let reader = open(&opts.path, opts.strict)?;
    let skip_ms = match opts.open_at {
        OpenAt::Start => 0,
        OpenAt::After(ms) => ms,
        OpenAt::FirstData if opts.follow || reader.is_stream() => 0,
        OpenAt::FirstData => {
            first_data(&opts.path)?.map_or(0, |t| t.saturating_sub(reader.header.started))
        }
    };
    let (ctl_tx, ctl_rx) = std_mpsc::channel();
    let scanned = Arc::new(OnceLock::new());
    // A stream (stdin, a pipe, a FIFO) is read once, by the player: a scan would steal it.
    if opts.controls && !opts.follow && !reader.is_stream() {
        let (path, out) = (opts.path.clone(), Arc::clone(&scanned));
        // A file that cannot be scanned plays anyway; the player reports its read errors.
        let _ = thread::Builder::new()
            .name("replay-scan".into())
            .spawn(move || {
                if let Ok(s) = scan(&path) {
                    let _ = out.set(s);
                }
            });
    }
    thread::Builder::new()
        .name("replay".into())
        .spawn(move || {
            let mut r = Replay::new(reader, opts, skip_ms, tx, scanned);
            if let Err(e) = r.run(&ctl_rx) {
                let _ = r.send(ReplayEvent::Frame(Frame::status(
                    r.pos,
                    StatusSource::Replay,
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

struct Replay<E> {
    reader: Reader,
    path: PathBuf,
    strict: bool,
    /// Corrupt lines already reported (a seek back re-reads them: said once).
    skips_said: usize,
    tx: Sender<E>,
    speed: Speed,
    follow: bool,
    paused: bool,
    pos: Ts,
    start: Ts,
    pending: Option<Frame>,
    ended: bool,
    last_t: Ts,
    rush: bool,
    looping: bool,
    scan: Arc<OnceLock<Scan>>,
    /// (device, inode) of the file being read: tells a truncation from a replacement.
    file_id: Option<(u64, u64)>,
    /// Said once that the path now names a FIFO or device, which --follow does not open.
    said_not_file: bool,
    /// The file's unclean end was reported (once, not at every loop or seek).
    tail_noted: bool,
}

impl<E: From<ReplayEvent>> Replay<E> {
    fn new(
        reader: Reader,
        opts: Options,
        skip_ms: i64,
        tx: Sender<E>,
        scan: Arc<OnceLock<Scan>>,
    ) -> Self {
        let start = reader.header.started;
        let id = file_id(&opts.path);
        Replay {
            reader,
            path: opts.path,
            strict: opts.strict,
            skips_said: 0,
            tx,
            speed: opts.speed,
            follow: opts.follow,
            paused: false,
            pos: start + skip_ms.max(0),
            start,
            pending: None,
            ended: false,
            last_t: start,
            rush: false,
            looping: opts.looping,
            scan,
            file_id: id,
            said_not_file: false,
            tail_noted: false,
        }
    }

    fn send(&self, e: ReplayEvent) -> bool {
        self.tx.blocking_send(E::from(e)).is_ok()
    }

    fn status(&self) -> ReplayStatus {
        ReplayStatus {
            pos: self.pos,
            start: self.start,
            end: self.scan.get().map(|s| s.end),
            speed: self.speed,
            paused: self.paused,
            ended: self.ended,
            following: self.follow,
            looping: self.looping,
        }
    }

    /// Emit everything available now instead of following the recorded timing: at `--speed
    /// max`, after `G`, and always when following a growing file (attach, catch up, tail).
    fn rushing(&self) -> bool {
        self.rush || self.follow || self.speed == Speed::Max
    }

    fn run(&mut self, ctl: &std_mpsc::Receiver<Control>) -> Result<(), RecordingError> {
        if !self.send(ReplayEvent::Frame(Frame::Header(
            self.reader.header.clone(),
        ))) {
            return Ok(());
        }
        let mut last = Instant::now();
        let mut last_status: Option<(Instant, ReplayStatus)> = None;
        loop {
            while let Ok(c) = ctl.try_recv() {
                self.control(c)?;
            }
            let now = Instant::now();
            // The loop turns at least every 250 ms; a longer gap is time gpumon was stopped
            // (Ctrl-Z, SIGSTOP) or the machine slept: the replay resumes where it stood,
            // as a paused one would, instead of jumping ahead by the time away.
            let elapsed = (now - last).min(Duration::from_secs(1));
            last = now;
            if let (false, false, Speed::Times(x)) = (self.paused, self.ended, self.speed) {
                self.pos = self
                    .pos
                    .saturating_add((elapsed.as_secs_f64() * 1000.0 * x) as i64);
            }
            if self.emit_due()?.is_none() {
                return Ok(());
            }
            // Status only when it changed (and at most 5 times a second): an idle replay
            // must not keep the screen redrawing.
            let st = self.status();
            let stale = last_status.is_none_or(|(at, prev)| {
                prev != st && (at.elapsed() >= Duration::from_millis(200) || prev.ended != st.ended)
            });
            if stale {
                if !self.send(ReplayEvent::Status(st)) {
                    return Ok(());
                }
                last_status = Some((Instant::now(), st));
            }
            // A recording that spans no time (a header only, or every frame at one `t`)
            // has nothing to loop over: starting again at once would spin a core.
            let spans_time = self.last_t > self.start;
            if self.ended && self.looping && !self.follow && !self.paused && spans_time {
                self.seek_to(self.start)?;
                continue;
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
                last = Instant::now();
                continue;
            }
            thread::sleep(Duration::from_millis(if self.ended { 250 } else { 20 }));
        }
    }

    /// Send every frame that is due. Returns None when the UI has gone away.
    fn emit_due(&mut self) -> Result<Option<()>, RecordingError> {
        loop {
            let f = match self.pending.take() {
                Some(f) => f,
                None => match self.reader.next()? {
                    Next::Frame(f) => f,
                    Next::End { .. } if self.follow && self.reader.replaced() => {
                        match self.reopen_replaced()? {
                            Reopen::Done => continue,
                            // Polled again on the next turn of the loop, never spun on.
                            Reopen::Waiting => return Ok(Some(())),
                            Reopen::UiGone => return Ok(None),
                        }
                    }
                    Next::End { .. } => {
                        if !self.say_skips() {
                            return Ok(None);
                        }
                        if !self.follow
                            && !self.tail_noted
                            && let Some(text) = self.reader.tail_note()
                        {
                            self.tail_noted = true;
                            let note =
                                Frame::status(self.last_t, StatusSource::Replay, Level::Warn, text);
                            if !self.send(ReplayEvent::Frame(note)) {
                                return Ok(None);
                            }
                        }
                        self.ended = true;
                        self.rush = false;
                        // The clock stops at the last frame; it never runs past the end.
                        self.pos = self.pos.min(self.last_t).max(self.start);
                        if self.rushing() {
                            self.pos = self.last_t;
                        }
                        return Ok(Some(()));
                    }
                },
            };
            self.ended = false;
            if !self.rushing() && f.time() > self.pos {
                self.pending = Some(f);
                return Ok(Some(()));
            }
            self.last_t = self.last_t.max(f.time());
            if self.rushing() {
                self.pos = self.last_t;
            }
            if !self.send(ReplayEvent::Frame(f)) {
                return Ok(None);
            }
        }
    }

    /// Say, at an end of the file, how many corrupt lines were left out since last said.
    /// Returns false when the UI has gone away.
    fn say_skips(&mut self) -> bool {
        let skips = self.reader.skipped();
        if skips.count <= self.skips_said {
            return true;
        }
        self.skips_said = skips.count;
        let Some(text) = skips.warning(&self.path) else {
            return true;
        };
        let note = Frame::status(self.last_t, StatusSource::Replay, Level::Warn, text);
        self.send(ReplayEvent::Frame(note))
    }

    fn control(&mut self, c: Control) -> Result<(), RecordingError> {
        match c {
            Control::TogglePause => self.paused = !self.paused,
            Control::SetSpeed(s) => self.speed = s,
            Control::ToEnd => self.rush = true,
            Control::ToggleLoop => self.looping = !self.looping,
            Control::Seek(d) => self.seek_to(self.pos.saturating_add(d))?,
            Control::SeekTo(t) => self.seek_to(t)?,
            Control::Mark(dir) => {
                if let Some(t) = self.scan.get().and_then(|s| s.mark(self.pos, dir)) {
                    self.seek_to(t)?;
                }
            }
        }
        Ok(())
    }

    /// `--follow` found the file replaced: say so, and start over on the new
    /// one (its frames may start anew). A new file still without its header
    /// is waited for. Returns false when the UI has gone away.
    fn reopen_replaced(&mut self) -> Result<Reopen, RecordingError> {
        use std::os::unix::fs::FileTypeExt;
        let md = std::fs::metadata(&self.path).ok();
        if let Some(m) = md.as_ref().filter(|m| !m.file_type().is_file()) {
            // Opening a FIFO blocks until someone writes to it: --follow went silent
            // with nothing said. Say so once and wait for a file.
            if !std::mem::replace(&mut self.said_not_file, true) {
                let kind = if m.file_type().is_fifo() {
                    "a FIFO"
                } else {
                    "not a regular file"
                };
                let text = format!(
                    "{}: the file was replaced by {kind}; --follow waits for a regular file there",
                    self.path.display()
                );
                let st = Frame::status(self.last_t, StatusSource::Replay, Level::Warn, text);
                if !self.send(ReplayEvent::Frame(st)) {
                    return Ok(Reopen::UiGone);
                }
            }
            return Ok(Reopen::Waiting);
        }
        self.said_not_file = false;
        let now_id = md.as_ref().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let reader = match open(&self.path, self.strict) {
            Ok(r) => r,
            Err(RecordingError::Empty { .. } | RecordingError::Open { .. }) => {
                return Ok(Reopen::Waiting);
            }
            Err(e) => return Err(e),
        };
        let what = if now_id.is_some() && now_id == self.file_id {
            "the file was replaced (truncated, or written anew at the same inode); reading it again from its start"
        } else {
            "the file was replaced; following the new one"
        };
        self.file_id = now_id;
        let text = format!("{}: {what}", self.path.display());
        // Stamped with the old file's last time: a later stamp would count as
        // already written and keep the new file's first frames out of the outputs.
        let said = self.send(ReplayEvent::Frame(Frame::status(
            self.last_t,
            StatusSource::Replay,
            Level::Warn,
            text,
        )));
        self.reader = reader;
        self.skips_said = 0;
        self.pending = None;
        self.start = self.reader.header.started;
        self.last_t = self.start;
        self.pos = self.start;
        let ok = said
            && self.send(ReplayEvent::Reset)
            && self.send(ReplayEvent::Frame(Frame::Header(
                self.reader.header.clone(),
            )));
        Ok(if ok { Reopen::Done } else { Reopen::UiGone })
    }

    /// Go to recorded time `target`: forward just moves the clock (the frames in between
    /// are sent at once); backward re-reads the file and rebuilds the model up to it.
    fn seek_to(&mut self, target: Ts) -> Result<(), RecordingError> {
        let target = target.max(self.start);
        if target >= self.pos {
            self.pos = match self.scan.get() {
                Some(s) => target.min(s.end),
                None => target,
            };
            return Ok(());
        }
        // Stdin or a pipe cannot be read again: there is no going back.
        if self.reader.is_stream() {
            return Ok(());
        }
        // A seek means "let me watch from there": at max speed it would just jump
        // back to the end, so playback continues at 1x.
        if self.speed == Speed::Max {
            self.speed = Speed::Times(1.0);
        }
        self.reader = open(&self.path, self.strict)?;
        self.pending = None;
        self.ended = false;
        self.rush = false;
        self.pos = target;
        self.last_t = self.start;
        let _ = self.send(ReplayEvent::Reset);
        let _ = self.send(ReplayEvent::Frame(Frame::Header(
            self.reader.header.clone(),
        )));
        // Everything up to the target is history: rebuild it at once.
        self.fast_forward_to(target)
    }

    fn fast_forward_to(&mut self, target: Ts) -> Result<(), RecordingError> {
        while let Next::Frame(f) = self.reader.next()? {
            if f.time() > target {
                self.pending = Some(f);
                return Ok(());
            }
            self.last_t = self.last_t.max(f.time());
            if !self.send(ReplayEvent::Frame(f)) {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// What re-opening a followed file that changed came to.
enum Reopen {
    Done,
    /// Not a file yet (a FIFO, or nothing with a header): try again later.
    Waiting,
    UiGone,
}

fn open(path: &Path, strict: bool) -> Result<Reader, RecordingError> {
    let mut r = Reader::open(path)?;
    r.set_strict(strict);
    Ok(r)
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU ticks the thread named `name` of this process has used.
    fn thread_ticks(name: &str) -> Option<u64> {
        for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == name {
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                return Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?);
            }
        }
        None
    }

    /// `L` on a recording without a time span once spun a core (499 of 500 ticks).
    /// Looping now waits for controls like the end of any recording.
    #[test]
    fn looping_a_recording_without_time_span_does_not_spin() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("header.jsonl");
        std::fs::write(
            &path,
            "{\"type\":\"header\",\"v\":1,\"format\":\"gpumon\",\"host\":\"h\",\"started\":1796000000000,\"interval_ms\":1000,\"gpus\":[],\"gpumon_version\":\"0.1.0\"}\n",
        )
        .expect("write");
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ReplayEvent>(1 << 16);
        let opts = Options {
            path,
            speed: Speed::Times(1.0),
            follow: false,
            open_at: OpenAt::Start,
            looping: true,
            controls: false,
            strict: false,
        };
        let _h = spawn(opts, tx).expect("replays");
        std::thread::sleep(Duration::from_millis(300));
        let before = thread_ticks("replay").expect("replay thread");
        std::thread::sleep(Duration::from_millis(1000));
        let used = thread_ticks("replay").expect("replay thread") - before;
        while rx.try_recv().is_ok() {}
        assert!(
            used < 20,
            "the replay thread used {used} ticks of 100 in a second"
        );
    }

    /// A recording started before its job opens where the first process shows, with the
    /// idle seconds before it already drawn as history, not on an empty card.
    #[test]
    fn a_replay_opens_where_the_first_process_shows() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus3/corpus3.jsonl");
        let start = Reader::open(&path).expect("opens").header.started;
        let first = first_data(&path).expect("reads").expect("a process shows");
        assert!(first - start >= 4_000, "idle for {} ms", first - start);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ReplayEvent>(1 << 16);
        let opts = Options {
            path,
            speed: Speed::Times(1.0),
            follow: false,
            open_at: OpenAt::FirstData,
            looping: false,
            controls: false,
            strict: false,
        };
        let _h = spawn(opts, tx).expect("replays");
        let (mut ticks_before, mut pos) = (0, None);
        while pos.is_none() {
            match rx.blocking_recv().expect("events") {
                ReplayEvent::Frame(Frame::Tick(t)) if t.t < first => ticks_before += 1,
                ReplayEvent::Status(s) => pos = Some(s.pos),
                _ => {}
            }
        }
        assert!(pos >= Some(first), "opened at {:?}, data at {first}", pos);
        assert!(
            pos < Some(first + 1_000),
            "opened at {:?}, data at {first}",
            pos
        );
        assert!(
            ticks_before >= 4,
            "the idle ticks are history: {ticks_before}"
        );
    }

    #[test]
    fn an_idle_recording_opens_at_its_start() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200_idle.jsonl");
        assert_eq!(first_data(&path).expect("reads"), None);
    }

    #[test]
    fn scan_finds_the_length_and_the_alert_and_epoch_marks() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/corpus_leak.jsonl");
        let start = Reader::open(&path).expect("opens").header.started;
        let s = scan(&path).expect("scans");
        assert_eq!((s.end - start) / 1000, 142, "a 142 s recording");
        // The recorded frag OOM of PID 788 was raised 40.086 s in.
        assert_eq!(s.alerts.first(), Some(&(start + 40_086)), "{:?}", s.alerts);
        assert!(s.epochs.len() > 10, "epoch ends: {}", s.epochs.len());
        assert!(
            s.epochs.windows(2).all(|w| w[1] - w[0] >= 1_000),
            "a second apart"
        );
        // `}` from the start goes to the first alert, not to the first epoch end; past the
        // last alert it goes to the next epoch end.
        assert_eq!(s.mark(start, 1), Some(start + 40_086));
        let last = *s.alerts.last().expect("alerts");
        assert!(s.mark(last, 1).is_some_and(|t| s.epochs.contains(&t)));
        assert_eq!(s.mark(start + 50_000, -1), Some(start + 40_086));
    }
}
