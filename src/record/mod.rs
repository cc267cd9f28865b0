//! Recordings: NDJSON, one `Frame` per line, header first (docs/recording-format.md).
//! The writer runs on its own thread behind a bounded queue so the event loop
//! never waits on the disk; it flushes at least every second, so a crash loses
//! at most the last second.

pub mod budget;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::model::frame::{FORMAT_VERSION, Frame, Header};
use crate::model::named::StatusSource;
use crate::record::budget::RecordBudget;

/// Longest line accepted when reading: bigger lines are corruption, not data.
pub const MAX_RECORDING_LINE: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot open recording {path}: {err}")]
    Open { path: PathBuf, err: std::io::Error },
    #[error("cannot read recording {path}: {err}")]
    Read { path: PathBuf, err: std::io::Error },
    #[error("{path}:{line}: {msg}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{path}: empty file, not a gpumon recording")]
    Empty { path: PathBuf },
    #[error(
        "{path}: recording format v{found} is newer than this gpumon (reads v{FORMAT_VERSION})"
    )]
    TooNew { path: PathBuf, found: u32 },
    #[error("cannot write recording {path}: {err}")]
    Write { path: PathBuf, err: std::io::Error },
}

/// Handle to the writer thread. Dropping it flushes and closes the file.
pub struct Recorder {
    tx: Option<mpsc::SyncSender<Frame>>,
    dropped: Arc<AtomicU64>,
    /// Why the writer stopped (disk full, file removed...), for the status line.
    error: Arc<std::sync::Mutex<Option<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Recorder {
    pub fn create(path: &Path, header: &Header) -> Result<Recorder, RecordingError> {
        ignore_sigxfsz();
        // Read access too: after a failed write the tail is read back to cut the
        // file at its last complete line.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|source| RecordingError::Write {
                path: path.into(),
                err: source,
            })?;
        let mut out = BufWriter::new(file);
        let werr = |source| RecordingError::Write {
            path: path.into(),
            err: source,
        };
        write_frame(&mut out, &Frame::Header(header.clone())).map_err(werr)?;
        out.flush().map_err(werr)?;
        let (tx, rx) = mpsc::sync_channel::<Frame>(4096);
        let dropped = Arc::new(AtomicU64::new(0));
        let error = Arc::new(std::sync::Mutex::new(None));
        let thread = thread::Builder::new()
            .name("recorder".into())
            .spawn({
                let error = Arc::clone(&error);
                let path = path.to_path_buf();
                move || {
                    if let Err(e) = writer_loop(out, rx)
                        && let Ok(mut slot) = error.lock()
                    {
                        *slot = Some(format!("cannot write recording {}: {e}", path.display()));
                    }
                }
            })
            .map_err(werr)?;
        Ok(Recorder {
            tx: Some(tx),
            dropped,
            error,
            thread: Some(thread),
        })
    }

    /// Queue a frame; never blocks. A full queue counts a drop, written later as a gap note.
    pub fn write(&self, frame: &Frame) {
        if matches!(frame, Frame::Header(_)) {
            return;
        }
        let Some(tx) = &self.tx else { return };
        match tx.try_send(frame.clone()) {
            Ok(()) => {
                let lost = self.dropped.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    let note = Frame::status(
                        frame.time(),
                        StatusSource::Recorder,
                        crate::model::frame::Level::Warn,
                        format!("recorder fell behind: {lost} frames not written (gap)"),
                    );
                    let _ = tx.try_send(note);
                }
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Recorder {
    /// Set once the writer has stopped on an I/O error; later frames are lost.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }

    /// Write what is queued, close the file, and say whether that failed.
    pub fn finish(mut self) -> Option<String> {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.error()
    }
}

/// A file-size limit (`ulimit -f`) kills a writer with SIGXFSZ by default,
/// without a word; ignored, the write fails with EFBIG, which the recorder
/// reports and stops on like any other write error.
fn ignore_sigxfsz() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn writer_loop(mut out: BufWriter<File>, rx: mpsc::Receiver<Frame>) -> std::io::Result<()> {
    let result = write_all_frames(&mut out, rx);
    if result.is_err() {
        // The buffer holds the rest of a line the disk refused: discard it (a
        // BufWriter would retry it on drop, and might append half a line once
        // space frees up), then cut the file back to its last complete line so
        // it replays.
        let (file, _unwritten) = out.into_parts();
        let _ = cut_to_last_line(&file);
    }
    result
}

fn write_all_frames(out: &mut BufWriter<File>, rx: mpsc::Receiver<Frame>) -> std::io::Result<()> {
    let mut last_flush = Instant::now();
    let mut budget = RecordBudget::default();
    let mut line = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(f) => {
                line.clear();
                serde_json::to_writer(&mut line, &f)?;
                line.push(b'\n');
                let (keep, note) = budget.admit(&f, line.len());
                if keep {
                    out.write_all(&line)?;
                }
                if let Some(n) = note {
                    write_frame(out, &n)?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return out.flush(),
        }
        if last_flush.elapsed() >= Duration::from_millis(500) {
            out.flush()?;
            last_flush = Instant::now();
        }
    }
}

/// Truncate `file` after its last newline. Shrinking needs no space, so this
/// works on a full disk and past a file-size limit.
fn cut_to_last_line(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(());
        }
        end = start;
    }
    file.set_len(0)
}

fn write_frame(out: &mut impl Write, f: &Frame) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, f)?;
    out.write_all(b"\n")
}

/// Streaming reader that names the line of any corruption and tolerates a
/// truncated last line (a recorder killed mid-write).
pub struct Reader {
    path: PathBuf,
    inner: BufReader<File>,
    line: usize,
    buf: Vec<u8>,
    /// Bytes consumed from the file (complete lines and the buffered partial one).
    consumed: u64,
    /// Device and inode of the open file, to notice it being replaced.
    id: (u64, u64),
    /// Stdin, a pipe or a FIFO: readable once, front to back (no validation
    /// pass, no seeking back, no re-opening).
    stream: bool,
    pub header: Header,
}

/// Is `path` something that can be read only once? `-` is stdin; a pipe, a
/// FIFO or a terminal (also behind `/dev/stdin` or `/dev/fd/N`) is a stream.
pub fn is_stream(path: &Path) -> bool {
    path.as_os_str() == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// What the reader found at the current end of the file.
#[allow(clippy::large_enum_variant)] // returned one at a time, never stored
#[derive(Debug)]
pub enum Next {
    Frame(Frame),
    /// Clean end of file (or an incomplete last line, which `--follow` waits on).
    End {
        partial: bool,
    },
}

impl Reader {
    pub fn open(path: &Path) -> Result<Reader, RecordingError> {
        let open_err = |source| RecordingError::Open {
            path: path.into(),
            err: source,
        };
        let file = if path.as_os_str() == "-" {
            use std::os::fd::AsFd;
            File::from(
                std::io::stdin()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(open_err)?,
            )
        } else {
            File::open(path).map_err(open_err)?
        };
        let id = file
            .metadata()
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            })
            .unwrap_or_default();
        let mut r = Reader {
            path: path.into(),
            inner: BufReader::new(file),
            line: 0,
            buf: Vec::new(),
            consumed: 0,
            id,
            stream: is_stream(path),
            header: empty_header(),
        };
        let first = match r.next()? {
            Next::Frame(f) => f,
            // A header without its newline (a file of one line) is still a header.
            Next::End { partial: true } => r.take_partial()?,
            Next::End { partial: false } => {
                return Err(RecordingError::Empty { path: path.into() });
            }
        };
        match first {
            Frame::Header(h) => {
                if h.v > FORMAT_VERSION {
                    return Err(RecordingError::TooNew {
                        path: path.into(),
                        found: h.v,
                    });
                }
                if h.v == 0 || h.format != "gpumon" {
                    return Err(r.corrupt(
                        1,
                        format!(
                            "not a gpumon recording header (format {:?}, v{})",
                            h.format, h.v
                        ),
                    ));
                }
                r.header = h;
                Ok(r)
            }
            _ => Err(r.corrupt(1, "first line is not a gpumon header".into())),
        }
    }

    /// The incomplete last line, parsed as a frame (at the end of the input).
    fn take_partial(&mut self) -> Result<Frame, RecordingError> {
        self.line += 1;
        let text = std::mem::take(&mut self.buf);
        self.parse(&text)
    }

    fn parse(&self, text: &[u8]) -> Result<Frame, RecordingError> {
        let mut trimmed = text.trim_ascii();
        if self.line == 1 {
            // A UTF-8 byte order mark, as some editors write it.
            trimmed = trimmed.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(trimmed);
        }
        serde_json::from_slice::<Frame>(trimmed).map_err(|e| {
            if self.line == 1
                && let Some(v) = newer_header(trimmed)
            {
                // A future header may lack v1's fields: say "newer", not "missing field".
                return RecordingError::TooNew {
                    path: self.path.clone(),
                    found: v,
                };
            }
            self.corrupt(self.line, format!("invalid frame: {e}"))
        })
    }

    /// Stdin, a pipe or a FIFO (see `is_stream`).
    pub fn is_stream(&self) -> bool {
        self.stream
    }

    fn corrupt(&self, line: usize, msg: String) -> RecordingError {
        RecordingError::Corrupt {
            path: self.path.clone(),
            line,
            msg,
        }
    }

    /// Next frame. An incomplete trailing line is not consumed: `--follow` retries it later.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Next, RecordingError> {
        loop {
            let start = self.buf.len();
            let limit = (MAX_RECORDING_LINE + 1 - start.min(MAX_RECORDING_LINE)) as u64;
            let n = std::io::Read::take(&mut self.inner, limit)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| RecordingError::Read {
                    path: self.path.clone(),
                    err: source,
                })?;
            self.consumed += n as u64;
            if self.buf.last() != Some(&b'\n') {
                if self.buf.len() > MAX_RECORDING_LINE {
                    return Err(self.corrupt(
                        self.line + 1,
                        format!("line longer than {MAX_RECORDING_LINE} bytes"),
                    ));
                }
                return Ok(Next::End {
                    partial: !self.buf.is_empty(),
                });
            }
            self.line += 1;
            let text = std::mem::take(&mut self.buf);
            if text.trim_ascii().is_empty() {
                continue;
            }
            return self.parse(&text).map(Next::Frame);
        }
    }
}

impl Reader {
    /// For `--follow` at the end of the file: has the path been given another
    /// file (re-created by a restarted recorder, or renamed over), or was this
    /// one truncated below what was read? Then the reader must be re-opened.
    pub fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        if self.stream {
            return false;
        }
        match std::fs::metadata(&self.path) {
            Ok(m) => (m.dev(), m.ino()) != self.id || m.len() < self.consumed,
            // Gone for now (deleted, or between unlink and re-create): keep waiting.
            Err(_) => false,
        }
    }
}

fn empty_header() -> Header {
    Header {
        v: 0,
        format: String::new(),
        host: String::new(),
        driver_version: None,
        nvml_version: None,
        cuda_version: None,
        started: 0,
        interval_ms: 0,
        gpus: vec![],
        gpumon_version: String::new(),
    }
}

/// `{"type":"header","v":N}` with N above what this gpumon reads.
fn newer_header(line: &[u8]) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    if v.get("type")?.as_str()? != "header" {
        return None;
    }
    let n = u32::try_from(v.get("v")?.as_u64()?).ok()?;
    (n > FORMAT_VERSION).then_some(n)
}

/// Check a whole recording up front so replay fails before the TUI starts.
/// Returns the number of frames and whether the last line was truncated.
/// A stream (`is_stream`) can be read only once, so it is not read here: its
/// problems show when the replay reaches them.
pub fn validate(path: &Path) -> Result<(Header, usize, bool), RecordingError> {
    if is_stream(path) {
        return Ok((empty_header(), 0, false));
    }
    let mut r = Reader::open(path)?;
    let mut n = 0;
    loop {
        match r.next()? {
            Next::Frame(_) => n += 1,
            Next::End { partial } => return Ok((r.header.clone(), n, partial)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::Tick;

    fn header() -> Header {
        Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: "h".into(),
            driver_version: Some("580".into()),
            nvml_version: None,
            cuda_version: None,
            started: 5,
            interval_ms: 1000,
            gpus: vec![],
            gpumon_version: "0".into(),
        }
    }

    #[test]
    fn round_trip_and_truncated_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        {
            let rec = Recorder::create(&path, &header()).expect("create");
            for t in 0..3 {
                rec.write(&Frame::Tick(Tick { t, gpus: vec![] }));
            }
        }
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("{\"type\":\"tick\",\"t\":9,\"gp");
        std::fs::write(&path, text).expect("write");
        let (h, n, partial) = validate(&path).expect("valid");
        assert_eq!(h.driver_version.as_deref(), Some("580"));
        assert_eq!(n, 3);
        assert!(partial);
    }

    #[test]
    fn corrupt_line_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        let h = serde_json::to_string(&Frame::Header(header())).expect("json");
        std::fs::write(
            &path,
            format!("{h}\n{{\"type\":\"tick\",\"t\":1,\"gpus\":[]}}\nnot json\n"),
        )
        .expect("write");
        let err = validate(&path).expect_err("corrupt");
        assert!(
            err.to_string()
                .ends_with("r.jsonl:3: invalid frame: expected ident at line 1 column 2"),
            "{err}"
        );
    }

    #[test]
    fn missing_empty_and_headerless_files_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = validate(&dir.path().join("nope")).expect_err("missing");
        assert!(missing.to_string().starts_with("cannot open recording"));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").expect("write");
        assert!(matches!(
            validate(&empty),
            Err(RecordingError::Empty { .. })
        ));
        let nohead = dir.path().join("nohead");
        std::fs::write(&nohead, "{\"type\":\"tick\",\"t\":1,\"gpus\":[]}\n").expect("write");
        assert!(
            validate(&nohead)
                .expect_err("no header")
                .to_string()
                .contains(":1: first line")
        );
    }

    #[test]
    fn newer_format_is_refused_clearly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        let mut h = header();
        h.v = 99;
        std::fs::write(
            &path,
            serde_json::to_string(&Frame::Header(h)).expect("json") + "\n",
        )
        .expect("write");
        assert!(
            validate(&path)
                .expect_err("too new")
                .to_string()
                .contains("v99 is newer")
        );
    }
}
