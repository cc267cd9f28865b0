//! Where the recorder's lines go: gzip (the default) or plain NDJSON.
//!
//! Gzip is written as one deflate stream per member with a sync flush at every
//! recorder flush (at least once a second): a sync flush ends on a byte
//! boundary with everything so far decodable, so a reader following the file
//! (`--follow`) or reading it after a SIGKILL gets every line up to the last
//! flush, and the compressor keeps its 32 KiB window across flushes. On the
//! bundled demos that is 10–17x smaller than NDJSON; a new member per flush
//! (each starting with an empty window) managed only 2.4–5.5x. A new member
//! starts every `MEMBER_BYTES` of text, so a finished file is a series of
//! checksummed members that any gzip tool reads.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

use flate2::Crc;
use flate2::write::GzEncoder;

/// How a recording is written. Readers tell them apart by the first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Gzip,
    Ndjson,
}

impl Format {
    /// The file name ending a recording of this format gets by default.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Gzip => ".gpumon.jsonl.gz",
            Format::Ndjson => ".gpumon.jsonl",
        }
    }

    pub fn parse(s: &str) -> Result<Format, String> {
        match s.to_ascii_lowercase().as_str() {
            "gz" | "gzip" => Ok(Format::Gzip),
            "ndjson" | "jsonl" => Ok(Format::Ndjson),
            _ => Err(format!(
                "invalid recording format '{s}': use gz (compressed, the default) or ndjson"
            )),
        }
    }
}

/// Uncompressed bytes per gzip member (about a minute of a busy 8-GPU run).
pub const MEMBER_BYTES: u32 = 16 << 20;

/// The file, counting what reached it, and shut once a write failed so that
/// nothing buffered above it (the encoder's trailer on drop) lands after the
/// cut.
pub(super) struct FileSink {
    file: File,
    written: u64,
    shut: bool,
}

impl Write for FileSink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.shut {
            return Err(io::Error::other("recording closed after a write error"));
        }
        let n = self.file.write(b)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The last point where the file was whole: its length, and inside a member
/// what that member holds so far (its checksum and length, to close it).
#[derive(Clone, Copy)]
enum Synced {
    Boundary(u64),
    InMember { len: u64, crc: u32, amount: u32 },
}

pub(super) struct GzOut {
    /// `None` only when closing a member failed.
    enc: Option<GzEncoder<BufWriter<FileSink>>>,
    /// The same file, to cut it after an error.
    file: File,
    crc: Crc,
    synced: Synced,
    dirty: bool,
}

pub(super) enum Out {
    Plain(BufWriter<FileSink>),
    Gzip(Box<GzOut>),
}

impl Out {
    pub(super) fn new(file: File, format: Format) -> io::Result<Out> {
        let dup = file.try_clone()?;
        let sink = BufWriter::new(FileSink {
            file,
            written: 0,
            shut: false,
        });
        Ok(match format {
            Format::Ndjson => Out::Plain(sink),
            Format::Gzip => Out::Gzip(Box::new(GzOut {
                enc: Some(GzEncoder::new(sink, flate2::Compression::default())),
                file: dup,
                crc: Crc::new(),
                synced: Synced::Boundary(0),
                dirty: false,
            })),
        })
    }

    /// One whole line (with its newline).
    pub(super) fn line(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Out::Plain(w) => w.write_all(b),
            Out::Gzip(g) => {
                if g.crc.amount() >= MEMBER_BYTES {
                    g.next_member()?;
                }
                g.enc()?.write_all(b)?;
                g.crc.update(b);
                g.dirty = true;
                Ok(())
            }
        }
    }

    /// Everything written so far reaches the file, readable as it stands.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::Plain(w) => w.flush(),
            Out::Gzip(g) if g.dirty => {
                let enc = g.enc()?;
                enc.flush()?;
                let len = enc.get_ref().get_ref().written;
                g.synced = Synced::InMember {
                    len,
                    crc: g.crc.sum(),
                    amount: g.crc.amount(),
                };
                g.dirty = false;
                Ok(())
            }
            Out::Gzip(_) => Ok(()),
        }
    }

    /// The end of the recording: a gzip file gets its trailer. On an error
    /// the output stays, for `cut_after_error`.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        match self {
            Out::Plain(w) => w.flush(),
            Out::Gzip(g) => {
                let enc = g.enc()?;
                enc.try_finish()?;
                enc.get_mut().flush()
            }
        }
    }

    /// After a write error: drop what the disk refused and cut the file back to
    /// its last whole point, so it replays. Shrinking needs no space, so this
    /// works on a full disk and past a file-size limit.
    pub(super) fn cut_after_error(self) -> io::Result<()> {
        match self {
            Out::Plain(w) => {
                // A BufWriter would retry the refused rest on drop, and might
                // append half a line once space frees up.
                let (sink, _unwritten) = w.into_parts();
                cut_to_last_line(&sink.file)
            }
            Out::Gzip(mut g) => {
                if let Some(enc) = g.enc.as_mut() {
                    enc.get_mut().get_mut().shut = true;
                }
                let (file, synced) = (g.file.try_clone()?, g.synced);
                // Dropping the encoder tries to write its trailer: the shut
                // sink refuses it.
                drop(g);
                close_member_at(&file, synced)
            }
        }
    }
}

impl GzOut {
    fn enc(&mut self) -> io::Result<&mut GzEncoder<BufWriter<FileSink>>> {
        self.enc
            .as_mut()
            .ok_or_else(|| io::Error::other("recording closed after a write error"))
    }

    fn next_member(&mut self) -> io::Result<()> {
        // Finished in place first: on an error the encoder (and its file) stays.
        self.enc()?.try_finish()?;
        self.enc()?.get_mut().flush()?;
        let Some(enc) = self.enc.take() else {
            return Ok(());
        };
        let sink = enc.finish()?;
        let len = sink.get_ref().written;
        self.enc = Some(GzEncoder::new(sink, flate2::Compression::default()));
        self.crc.reset();
        self.synced = Synced::Boundary(len);
        Ok(())
    }
}

/// Cut the file at `synced` and, inside a member, close that member there: a
/// sync flush ends on a byte boundary, so an empty final block (`03 00`), the
/// checksum and the length make it a whole gzip member again. Where even those
/// ten bytes do not fit (a file-size limit), the member stays open: readers
/// take everything before the cut and say the recording ends unclosed.
fn close_member_at(file: &File, synced: Synced) -> io::Result<()> {
    match synced {
        Synced::Boundary(len) => file.set_len(len),
        Synced::InMember { len, crc, amount } => {
            file.set_len(len)?;
            let mut tail = vec![0x03, 0x00];
            tail.extend(crc.to_le_bytes());
            tail.extend(amount.to_le_bytes());
            if file.write_all_at(&tail, len).is_err() {
                file.set_len(len)?;
            }
            Ok(())
        }
    }
}

/// Truncate `file` after its last newline.
fn cut_to_last_line(file: &File) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn out(dir: &std::path::Path) -> (Out, File, std::path::PathBuf) {
        let path = dir.join("r.gz");
        let file = File::create(&path).expect("create");
        let view = File::open(&path).expect("open");
        (Out::new(file, Format::Gzip).expect("out"), view, path)
    }

    fn gunzip(bytes: &[u8]) -> io::Result<String> {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(bytes).read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn after_a_write_error_the_member_is_closed_at_the_last_flush() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut o, _view, path) = out(dir.path());
        o.line(b"kept 1\n").expect("line");
        o.line(b"kept 2\n").expect("line");
        o.flush().expect("flush");
        let flushed = std::fs::metadata(&path).expect("stat").len();
        // Written but never flushed: what a refused write leaves half done.
        let mut x = 1u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            o.line(format!("lost {x}\n").as_bytes()).expect("line");
        }
        if let Out::Gzip(g) = &mut o {
            g.enc()
                .expect("enc")
                .get_mut()
                .flush()
                .expect("some of it reaches the file");
        }
        let grown = std::fs::metadata(&path).expect("stat").len();
        assert!(grown > flushed + 10_000, "{flushed} -> {grown}");
        o.cut_after_error().expect("cut");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(
            gunzip(&bytes).expect("a whole gzip file again"),
            "kept 1\nkept 2\n"
        );
    }

    #[test]
    fn members_roll_over_and_read_as_one_stream() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut o, _view, path) = out(dir.path());
        let mut want = String::new();
        for i in 0..40_000 {
            let l = format!("{{\"line\":{i}}}\n");
            if let Out::Gzip(g) = &mut o
                && g.crc.amount() >= 64 * 1024
            {
                g.next_member().expect("next member");
            }
            o.line(l.as_bytes()).expect("line");
            want.push_str(&l);
        }
        o.finish().expect("finish");
        let bytes = std::fs::read(&path).expect("read");
        let members = bytes.windows(3).filter(|w| *w == [0x1f, 0x8b, 8]).count();
        assert!(members >= 8, "{members} members");
        assert_eq!(gunzip(&bytes).expect("whole"), want);
    }

    #[test]
    fn formats_parse() {
        assert_eq!(Format::parse("GZ"), Ok(Format::Gzip));
        assert_eq!(Format::parse("ndjson"), Ok(Format::Ndjson));
        assert!(Format::parse("zip").expect_err("bad").contains("use gz"));
    }
}
