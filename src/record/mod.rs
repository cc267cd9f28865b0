//! Recordings: NDJSON, one `Frame` per line, header first, gzip-compressed by
//! default (docs/recording-format.md). The writer runs on its own thread behind
//! a bounded queue so the event loop never waits on the disk; it flushes at
//! least every second, so a crash loses at most the last second. Readers take
//! either form, told apart by the first bytes.

pub mod budget;
mod error;
mod inflate;
mod reader;
pub mod sink;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::model::frame::{Frame, Header};
use crate::model::named::StatusSource;
use crate::record::budget::RecordBudget;
pub use crate::record::error::{MAX_RECORDING_LINE, RecordingError};
pub use crate::record::reader::{Next, Reader, Skips, is_stream, validate};
pub use crate::record::sink::Format;
use crate::record::sink::Out;

/// Handle to the writer thread. Dropping it flushes and closes the file.
pub struct Recorder {
    tx: Option<mpsc::SyncSender<ToWriter>>,
    dropped: Arc<AtomicU64>,
    /// Why the writer stopped (disk full, file removed...), for the status line.
    error: Arc<std::sync::Mutex<Option<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Recorder {
    pub fn create(
        path: &Path,
        header: &Header,
        format: Format,
    ) -> Result<Recorder, RecordingError> {
        ignore_sigxfsz();
        // Read access too: after a failed write the tail of a plain file is read
        // back to cut it at its last complete line.
        // (`fmt::out_file` opens the new file read-write.)
        let file =
            crate::fmt::out_file::open_stream(path).map_err(|source| RecordingError::Write {
                path: path.into(),
                err: source,
            })?;
        let werr = |source| RecordingError::Write {
            path: path.into(),
            err: source,
        };
        let mut out = Out::new(file, format).map_err(werr)?;
        let mut line = Vec::new();
        encode(&mut line, &Frame::Header(header.clone())).map_err(werr)?;
        out.line(&line).map_err(werr)?;
        out.flush().map_err(werr)?;
        let (tx, rx) = mpsc::sync_channel::<ToWriter>(4096);
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
        match tx.try_send(ToWriter::Frame(frame.clone())) {
            Ok(()) => {
                let lost = self.dropped.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    let note = Frame::status(
                        frame.time(),
                        StatusSource::Recorder,
                        crate::model::frame::Level::Warn,
                        format!("recorder fell behind: {lost} frames not written (gap)"),
                    );
                    let _ = tx.try_send(ToWriter::Frame(note));
                }
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// What the writer thread is sent.
#[allow(clippy::large_enum_variant)] // sent one at a time, as the frames were before
enum ToWriter {
    Frame(Frame),
    Flush,
}

impl Recorder {
    /// Flush what is queued now rather than within the second (the writer's own
    /// cadence): for a moment that matters, such as an alert raised. Never
    /// blocks; a full queue flushes soon anyway.
    pub fn flush(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(ToWriter::Flush);
        }
    }

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
/// without a word; ignored, the write fails with EFBIG, which the recorder (and
/// every other output) reports and stops on like any other write error. Only
/// in modes that write files: a program `gpumon run` starts would inherit it.
pub fn ignore_sigxfsz() {
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

fn writer_loop(mut out: Out, rx: mpsc::Receiver<ToWriter>) -> std::io::Result<()> {
    let result = write_all_frames(&mut out, rx);
    if result.is_err() {
        let _ = out.cut_after_error();
    }
    result
}

fn write_all_frames(out: &mut Out, rx: mpsc::Receiver<ToWriter>) -> std::io::Result<()> {
    let mut last_flush = Instant::now();
    let mut budget = RecordBudget::default();
    let mut line = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(ToWriter::Flush) => {
                out.flush()?;
                last_flush = Instant::now();
                continue;
            }
            Ok(ToWriter::Frame(f)) => {
                encode(&mut line, &f)?;
                let (keep, note) = budget.admit(&f, line.len());
                if keep {
                    out.line(&line)?;
                }
                if let Some(n) = note {
                    encode(&mut line, &n)?;
                    out.line(&line)?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return out.finish(),
        }
        if last_flush.elapsed() >= Duration::from_millis(500) {
            out.flush()?;
            last_flush = Instant::now();
        }
    }
}

/// `f` as one line of JSON, newline included, in `line` (reused).
fn encode(line: &mut Vec<u8>, f: &Frame) -> std::io::Result<()> {
    line.clear();
    serde_json::to_writer(&mut *line, f)?;
    line.push(b'\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::FORMAT_VERSION;
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
            let rec = Recorder::create(&path, &header(), Format::Ndjson).expect("create");
            for t in 0..3 {
                rec.write(&Frame::Tick(Tick { t, gpus: vec![] }));
            }
        }
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("{\"type\":\"tick\",\"t\":9,\"gp");
        std::fs::write(&path, text).expect("write");
        let (h, n, partial) = validate(&path, true).expect("valid");
        assert_eq!(h.driver_version.as_deref(), Some("580"));
        assert_eq!(n, 3);
        assert!(partial);
    }

    #[test]
    fn a_gzip_recording_is_one_valid_gzip_stream_and_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.gpumon.jsonl.gz");
        let rec = Recorder::create(&path, &header(), Format::Gzip).expect("create");
        for t in 0..50 {
            rec.write(&Frame::Tick(Tick { t, gpus: vec![] }));
        }
        assert_eq!(rec.finish(), None);
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes[..2], [0x1f, 0x8b]);
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::MultiGzDecoder::new(&bytes[..]),
            &mut text,
        )
        .expect("any gzip reader reads it whole");
        assert_eq!(text.lines().count(), 51);
        let (h, n, partial) = validate(&path, true).expect("valid");
        assert_eq!((h.started, n, partial), (5, 50, false));
        let mut r = Reader::open(&path).expect("open");
        while let Next::Frame(_) = r.next().expect("frame") {}
        assert_eq!(r.tail_note(), None, "closed cleanly");
    }

    #[test]
    fn a_corrupt_compressed_tail_is_named_after_the_lines_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.gz");
        let rec = Recorder::create(&path, &header(), Format::Gzip).expect("create");
        for t in 0..20 {
            rec.write(&Frame::Tick(Tick { t, gpus: vec![] }));
        }
        assert_eq!(rec.finish(), None);
        let mut bytes = std::fs::read(&path).expect("read");
        let n = bytes.len();
        bytes[n - 7] ^= 0x55; // the checksum
        std::fs::write(&path, &bytes).expect("write");
        let mut r = Reader::open(&path).expect("the header still reads");
        let mut frames = 0;
        let err = loop {
            match r.next() {
                Ok(Next::Frame(_)) => frames += 1,
                Ok(Next::End { .. }) => panic!("corruption not seen"),
                Err(e) => break e,
            }
        };
        assert_eq!(frames, 20, "every frame before the bad checksum");
        assert!(
            err.to_string().contains(
                "r.gz:22: compressed data corrupt at byte"
            ) && err.to_string().contains("member 1 fails its checksum (CRC-32 or length) (the 21 lines before it were read)"),
            "{err}"
        );
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
        let err = validate(&path, true).expect_err("corrupt");
        assert!(
            err.to_string()
                .ends_with("r.jsonl:3:2: invalid frame: expected ident"),
            "the file's line and the column, not serde's \"line 1\": {err}"
        );
        // Not strict: the line is left out and counted, the frames around it read.
        let (_, frames, _) = validate(&path, false).expect("skips");
        assert_eq!(frames, 1);
        let mut r = Reader::open(&path).expect("open");
        while let Next::Frame(_) = r.next().expect("frame") {}
        let warning = r.skipped().warning(&path).expect("one skipped");
        assert!(
            warning.ends_with(
                "r.jsonl: skipped 1 corrupt line (line 3, column 2: expected ident); \
                 --strict refuses such a recording"
            ),
            "{warning}"
        );
    }

    #[test]
    fn a_corrupt_header_is_refused_even_when_lines_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "{\"type\":\"header\",oops}\n").expect("write");
        let err = validate(&path, false).expect_err("no header");
        assert!(err.to_string().contains("r.jsonl:1:"), "{err}");
    }

    #[test]
    fn missing_empty_and_headerless_files_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = validate(&dir.path().join("nope"), true).expect_err("missing");
        assert!(missing.to_string().starts_with("cannot open recording"));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").expect("write");
        assert!(matches!(
            validate(&empty, true),
            Err(RecordingError::Empty { .. })
        ));
        let nohead = dir.path().join("nohead");
        std::fs::write(&nohead, "{\"type\":\"tick\",\"t\":1,\"gpus\":[]}\n").expect("write");
        assert!(
            validate(&nohead, true)
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
            validate(&path, true)
                .expect_err("too new")
                .to_string()
                .contains("v99 is newer")
        );
    }
}
