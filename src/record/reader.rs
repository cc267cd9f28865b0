//! Reading a recording, plain NDJSON or gzip (told apart by the first two
//! bytes), whole or while it grows (`--follow`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::model::frame::{FORMAT_VERSION, Frame, Header};
use crate::record::error::{MAX_RECORDING_LINE, RecordingError};
use crate::record::inflate::{Inflate, MAGIC};

/// The file's bytes, counted, with the first ones (looked at to tell the
/// format) handed out again first.
struct Raw {
    file: File,
    peeked: Vec<u8>,
    taken: u64,
}

impl Read for Raw {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if !self.peeked.is_empty() {
            let n = out.len().min(self.peeked.len());
            out[..n].copy_from_slice(&self.peeked[..n]);
            self.peeked.drain(..n);
            return Ok(n);
        }
        let n = self.file.read(out)?;
        self.taken += n as u64;
        Ok(n)
    }
}

enum Input {
    Plain(Raw),
    Gzip(Box<Inflate<Raw>>),
}

impl Input {
    /// Reads up to the first two bytes (a stream cannot be rewound) to tell
    /// gzip from text.
    fn open(mut file: File) -> std::io::Result<Input> {
        let mut head = [0u8; 2];
        let mut n = 0;
        while n < head.len() {
            match file.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let raw = Raw {
            file,
            peeked: head[..n].to_vec(),
            taken: n as u64,
        };
        Ok(if head[..n] == MAGIC {
            Input::Gzip(Box::new(Inflate::new(raw)))
        } else {
            Input::Plain(raw)
        })
    }

    /// Bytes read from the file so far.
    fn taken(&self) -> u64 {
        match self {
            Input::Plain(r) => r.taken,
            Input::Gzip(z) => z.taken(),
        }
    }
}

impl Read for Input {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Input::Plain(r) => r.read(out),
            Input::Gzip(z) => z.read(out),
        }
    }
}

/// Streaming reader that names the line of any corruption and tolerates a
/// truncated last line (a recorder killed mid-write).
pub struct Reader {
    path: PathBuf,
    inner: BufReader<Input>,
    line: usize,
    buf: Vec<u8>,
    /// Device and inode of the open file, to notice it being replaced.
    id: (u64, u64),
    /// Stdin, a pipe or a FIFO: readable once, front to back (no validation
    /// pass, no seeking back, no re-opening).
    stream: bool,
    pub header: Header,
    /// Refuse the recording at its first corrupt line (`--strict`) instead of skipping it.
    strict: bool,
    skipped: Skips,
}

/// Corrupt lines left out so far (after the header, which is never skipped), and the first
/// of them, for the warning.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Skips {
    pub count: usize,
    /// `line 51, column 16: key must be a string`.
    pub first: Option<String>,
}

impl Skips {
    /// The warning a reader of `path` gives once it has skipped lines; `None` when none.
    pub fn warning(&self, path: &Path) -> Option<String> {
        let first = self.first.as_deref()?;
        let (lines, at) = match self.count {
            1 => ("corrupt line", ""),
            _ => ("corrupt lines", "first at "),
        };
        Some(format!(
            "{}: skipped {} {lines} ({at}{first}); --strict refuses such a recording",
            path.display(),
            self.count
        ))
    }
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
        let input = Input::open(file).map_err(|source| RecordingError::Read {
            path: path.into(),
            err: source,
        })?;
        let mut r = Reader {
            path: path.into(),
            inner: BufReader::new(input),
            line: 0,
            buf: Vec::new(),
            id,
            stream: is_stream(path),
            header: empty_header(),
            strict: false,
            skipped: Skips::default(),
        };
        let first = match r.next()? {
            Next::Frame(f) => f,
            // A header without its newline (a file of one line) is still a header.
            Next::End { partial: true } if !r.buf.is_empty() => r.take_partial()?,
            Next::End { .. } => {
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
            // serde_json counts within the one line it was given ("at line 1 column 16"):
            // the file's line is ours, the column is serde's.
            RecordingError::Corrupt {
                path: self.path.clone(),
                line: self.line,
                column: Some(e.column()).filter(|&c| c > 0),
                msg: format!("invalid frame: {}", without_position(&e)),
            }
        })
    }

    /// Refuse the recording at its first corrupt line instead of skipping it.
    pub fn set_strict(&mut self, strict: bool) {
        self.strict = strict;
    }

    /// The corrupt lines skipped so far.
    pub fn skipped(&self) -> &Skips {
        &self.skipped
    }

    /// Stdin, a pipe or a FIFO (see `is_stream`).
    pub fn is_stream(&self) -> bool {
        self.stream
    }

    fn corrupt(&self, line: usize, msg: String) -> RecordingError {
        RecordingError::Corrupt {
            path: self.path.clone(),
            line,
            column: None,
            msg,
        }
    }

    /// Next frame. An incomplete trailing line is not consumed: `--follow` retries it later.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Next, RecordingError> {
        loop {
            let start = self.buf.len();
            let limit = (MAX_RECORDING_LINE + 1 - start.min(MAX_RECORDING_LINE)) as u64;
            std::io::Read::take(&mut self.inner, limit)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| self.read_error(source))?;
            if self.buf.last() != Some(&b'\n') {
                if self.buf.len() > MAX_RECORDING_LINE {
                    return Err(self.corrupt(
                        self.line + 1,
                        format!("line longer than {MAX_RECORDING_LINE} bytes"),
                    ));
                }
                return Ok(Next::End {
                    partial: !self.buf.is_empty() || self.unclosed(),
                });
            }
            self.line += 1;
            let text = std::mem::take(&mut self.buf);
            if text.trim_ascii().is_empty() {
                continue;
            }
            match self.parse(&text) {
                // One bad line (a disk error, a stray write) must not cost the hours around
                // it: it is left out and counted, and the replay says so (`Skips::warning`).
                Err(RecordingError::Corrupt {
                    line, column, msg, ..
                }) if !self.strict && self.line > 1 => {
                    self.skipped.count += 1;
                    self.skipped.first.get_or_insert_with(|| {
                        let col = column.map(|c| format!(", column {c}")).unwrap_or_default();
                        let msg = msg.trim_start_matches("invalid frame: ");
                        format!("line {line}{col}: {msg}")
                    });
                    continue;
                }
                r => return r.map(Next::Frame),
            }
        }
    }
}

impl Reader {
    /// Compressed data that does not decode is corruption at the line it
    /// would have continued; everything before it was read.
    fn read_error(&self, err: std::io::Error) -> RecordingError {
        if err.kind() == std::io::ErrorKind::InvalidData && self.compressed() {
            return RecordingError::CorruptCompressed {
                path: self.path.clone(),
                line: self.line + 1,
                msg: format!("{err} (the {} lines before it were read)", self.line),
            };
        }
        RecordingError::Read {
            path: self.path.clone(),
            err,
        }
    }

    /// Gzip (told by its first bytes), not plain NDJSON.
    pub fn compressed(&self) -> bool {
        matches!(self.inner.get_ref(), Input::Gzip(_))
    }

    /// A gzip recording whose last member is not closed at the current end:
    /// still being written, or its writer was killed.
    fn unclosed(&self) -> bool {
        match self.inner.get_ref() {
            Input::Gzip(z) => z.mid_member() || !self.inner.buffer().is_empty(),
            Input::Plain(_) => false,
        }
    }

    /// At the end of a file that is not being followed: what its tail says
    /// about how the writer stopped, when that was not cleanly.
    pub fn tail_note(&self) -> Option<String> {
        let path = self.path.display();
        if self.unclosed() {
            Some(format!(
                "{path}: unclosed gzip tail (recorder killed?); played to its last flush"
            ))
        } else if !self.buf.is_empty() {
            Some(format!(
                "{path}: last line incomplete (recorder killed?); left out"
            ))
        } else {
            None
        }
    }

    /// For `--follow` at the end of the file: has the path been given another
    /// file (re-created by a restarted recorder, or renamed over), or was this
    /// one truncated below what was read? Then the reader must be re-opened.
    pub fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        if self.stream {
            return false;
        }
        match std::fs::metadata(&self.path) {
            Ok(m) => (m.dev(), m.ino()) != self.id || m.len() < self.inner.get_ref().taken(),
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

/// serde_json's message without its " at line L column C" (the line is always 1 here).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let tail = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&tail).unwrap_or(&text).to_string()
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
/// Compressed data that stops decoding, or a gzip cut short, is not refused here
/// unless `strict`: the frames before it play, and the replay stops at it with the
/// error (a bit flipped late in a multi-day recording must not cost the days before it).
/// A stream (`is_stream`) can be read only once, so it is not read here: its
/// problems show when the replay reaches them.
pub fn validate(path: &Path, strict: bool) -> Result<(Header, usize, bool), RecordingError> {
    if is_stream(path) {
        return Ok((empty_header(), 0, false));
    }
    let mut r = Reader::open(path)?;
    r.set_strict(strict);
    let mut n = 0;
    loop {
        match r.next() {
            Ok(Next::Frame(_)) => n += 1,
            // `--strict` refuses a gzip cut short (its writer killed mid-member) as it
            // refuses a corrupt line; without it the frames before the cut play.
            Ok(Next::End { .. }) if strict && r.unclosed() => {
                return Err(RecordingError::CorruptCompressed {
                    path: r.path.clone(),
                    line: r.line + 1,
                    msg: format!(
                        "unclosed gzip tail after {} lines (recorder killed?); --strict refuses a truncated recording",
                        r.line
                    ),
                });
            }
            Ok(Next::End { partial }) => return Ok((r.header.clone(), n, partial)),
            Err(e @ RecordingError::CorruptCompressed { .. }) if strict => return Err(e),
            Err(RecordingError::CorruptCompressed { .. }) => {
                return Ok((r.header.clone(), n, true));
            }
            Err(e) => return Err(e),
        }
    }
}
