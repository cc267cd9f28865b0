//! Reading a gzip recording that may still be growing.
//!
//! flate2's `MultiGzDecoder` reads a finished file, but it takes the end of
//! the bytes available now for the end of the stream: a `--follow` reader at
//! the tail of a file the recorder is still writing (mid-member, between two
//! flushes) would get an "unexpected end" error instead of "nothing yet". So
//! the gzip framing (RFC 1952: header, raw deflate, CRC-32 and length) is
//! walked here, on flate2's incremental `Decompress`, which keeps its state
//! between calls: at the current end `read` returns 0, and a later call goes on
//! with what was appended since. Members follow each other (a concatenation of
//! members is one gzip stream); each one's checksum is verified at its end.

use std::io::{self, Read};

use flate2::{Crc, Decompress, FlushDecompress, Status};

/// First two bytes of every gzip member.
pub(super) const MAGIC: [u8; 2] = [0x1f, 0x8b];

const RESERVED_FLAGS: u8 = 0xe0; // reserved flag bits: must be zero
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;

/// Room for compressed input; a member header must fit (a name or comment
/// longer than this is not one gpumon or gzip writes).
const WINDOW: usize = 64 * 1024;

enum State {
    /// Before a member's header (at the start, or after the previous trailer).
    Header,
    Body(Box<Decompress>, Crc),
    /// The checksum and length the trailer must state.
    Trailer(u32, u32),
    /// Corrupt data was found; every later read repeats the error.
    Failed(String),
}

pub(super) struct Inflate<R> {
    src: R,
    buf: Box<[u8]>,
    lo: usize,
    hi: usize,
    state: State,
    /// Compressed bytes taken from `src` so far.
    taken: u64,
    members: u64,
}

impl<R: Read> Inflate<R> {
    pub(super) fn new(src: R) -> Self {
        Inflate {
            src,
            buf: vec![0; WINDOW].into_boxed_slice(),
            lo: 0,
            hi: 0,
            state: State::Header,
            taken: 0,
            members: 0,
        }
    }

    /// Compressed bytes read from the source so far.
    pub(super) fn taken(&self) -> u64 {
        self.taken
    }

    /// At the current end, inside a member (its trailer not read yet): a file
    /// being written, or one whose writer was killed before closing it.
    pub(super) fn mid_member(&self) -> bool {
        !matches!(self.state, State::Header) || self.lo < self.hi
    }

    /// File offset of the next compressed byte to decode, for messages.
    fn offset(&self) -> u64 {
        self.taken - (self.hi - self.lo) as u64
    }

    /// More compressed input; false at the current end of the source.
    fn fill(&mut self) -> io::Result<bool> {
        if self.lo > 0 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        if self.hi == self.buf.len() {
            return Ok(true);
        }
        let n = loop {
            match self.src.read(&mut self.buf[self.hi..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        self.hi += n;
        self.taken += n as u64;
        Ok(n > 0)
    }

    fn fail(&mut self, what: String) -> io::Error {
        let msg = format!("compressed data corrupt at byte {}: {what}", self.offset());
        self.state = State::Failed(msg.clone());
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }
}

/// Length of the gzip member header at the start of `b`: `Ok(None)` when more
/// bytes are needed, `Err` when `b` does not start a gzip member.
fn header_len(b: &[u8]) -> Result<Option<usize>, String> {
    let need = |n: usize| b.len() < n;
    if b.len() >= 2 && b[..2] != MAGIC || b.len() == 1 && b[0] != MAGIC[0] {
        return Err("not the start of a gzip member".into());
    }
    if need(10) {
        return Ok(None);
    }
    if b[2] != 8 {
        return Err(format!("unknown compression method {}", b[2]));
    }
    let flags = b[3];
    if flags & RESERVED_FLAGS != 0 {
        return Err(format!("reserved gzip header flags {flags:#04x}"));
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        if need(at + 2) {
            return Ok(None);
        }
        at += 2 + usize::from(u16::from_le_bytes([b[at], b[at + 1]]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            match b.get(at..).and_then(|r| r.iter().position(|&c| c == 0)) {
                Some(i) => at += i + 1,
                None => return Ok(None),
            }
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    Ok((!need(at)).then_some(at))
}

impl<R: Read> Read for Inflate<R> {
    /// Decompressed bytes; 0 at the current end of the source (which may grow).
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            match &mut self.state {
                State::Failed(msg) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, msg.clone()));
                }
                State::Header => match header_len(&self.buf[self.lo..self.hi]) {
                    Ok(Some(n)) => {
                        self.lo += n;
                        self.members += 1;
                        self.state = State::Body(Box::new(Decompress::new(false)), Crc::new());
                    }
                    Ok(None) => {
                        if self.hi - self.lo == self.buf.len() {
                            return Err(self.fail("gzip member header too long".into()));
                        }
                        if !self.fill()? {
                            return Ok(0);
                        }
                    }
                    Err(e) if self.members > 0 => {
                        return Err(self.fail(format!("after member {}: {e}", self.members)));
                    }
                    Err(e) => return Err(self.fail(e)),
                },
                State::Body(z, crc) => {
                    let (in0, out0) = (z.total_in(), z.total_out());
                    let status =
                        z.decompress(&self.buf[self.lo..self.hi], out, FlushDecompress::None);
                    let used = (z.total_in() - in0) as usize;
                    let made = (z.total_out() - out0) as usize;
                    crc.update(&out[..made]);
                    self.lo += used;
                    match status {
                        Err(e) => return Err(self.fail(format!("invalid deflate data ({e})"))),
                        Ok(Status::StreamEnd) => {
                            self.state = State::Trailer(crc.sum(), crc.amount());
                        }
                        Ok(_) => {}
                    }
                    if made > 0 {
                        return Ok(made);
                    }
                    if used == 0 && matches!(self.state, State::Body(..)) {
                        if self.lo == 0 && self.hi == self.buf.len() {
                            // A full window that yields nothing: never valid deflate.
                            return Err(self.fail("invalid deflate data (no progress)".into()));
                        }
                        if !self.fill()? {
                            return Ok(0);
                        }
                    }
                }
                State::Trailer(sum_want, len_want) => {
                    let (sum_want, len_want) = (*sum_want, *len_want);
                    if self.hi - self.lo < 8 {
                        if !self.fill()? {
                            return Ok(0);
                        }
                        continue;
                    }
                    let t = &self.buf[self.lo..self.lo + 8];
                    let sum = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
                    let len = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
                    if sum != sum_want || len != len_want {
                        return Err(self.fail(format!(
                            "member {} fails its checksum (CRC-32 or length)",
                            self.members
                        )));
                    }
                    self.lo += 8;
                    self.state = State::Header;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn member(text: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text).expect("compress");
        e.finish().expect("finish")
    }

    /// A source that hands out only what has been "written" so far.
    struct Growing {
        data: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
        pos: usize,
    }

    impl Read for Growing {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let d = self.data.borrow();
            // A byte at a time: every boundary inside the framing is crossed.
            let n = out.len().min(d.len() - self.pos).min(1);
            out[..n].copy_from_slice(&d[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn drain(r: &mut impl Read) -> Vec<u8> {
        let mut v = Vec::new();
        r.read_to_end(&mut v).expect("read");
        v
    }

    #[test]
    fn concatenated_members_read_as_one_stream() {
        let mut file = member(b"one\n");
        file.extend(member(b"two\n"));
        let mut r = Inflate::new(&file[..]);
        assert_eq!(drain(&mut r), b"one\ntwo\n");
        assert!(!r.mid_member());
    }

    #[test]
    fn a_growing_file_is_read_as_it_grows_byte_by_byte() {
        let all = [member(b"first line\n"), member(b"second line\n")].concat();
        let data = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut r = Inflate::new(Growing {
            data: data.clone(),
            pos: 0,
        });
        let mut got = Vec::new();
        for b in &all {
            data.borrow_mut().push(*b);
            got.extend(drain(&mut r));
        }
        assert_eq!(got, b"first line\nsecond line\n");
        assert!(!r.mid_member());
    }

    #[test]
    fn a_sync_flushed_unfinished_member_yields_all_it_flushed() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b"flushed\n").expect("write");
        e.flush().expect("sync flush");
        let mut file = e.get_ref().clone();
        let mut r = Inflate::new(&file[..]);
        assert_eq!(drain(&mut r), b"flushed\n");
        assert!(r.mid_member(), "no trailer yet");
        // Cut inside the flush marker: what comes out is a prefix, without an error.
        file.truncate(file.len() - 3);
        let got = drain(&mut Inflate::new(&file[..]));
        assert!(b"flushed\n".starts_with(&got), "{got:?}");
    }

    #[test]
    fn corruption_is_an_error_after_the_data_before_it() {
        let mut file = member(b"good\n");
        let mut bad = member(b"second member\n");
        let n = bad.len();
        bad[n - 6] ^= 0xff; // inside the CRC
        file.extend(bad);
        let mut r = Inflate::new(&file[..]);
        let mut got = Vec::new();
        let err = loop {
            let mut b = [0u8; 4];
            match r.read(&mut b) {
                Ok(0) => panic!("no error"),
                Ok(n) => got.extend(&b[..n]),
                Err(e) => break e,
            }
        };
        assert!(got.starts_with(b"good\n"), "{got:?}");
        assert!(
            err.to_string().contains("member 2 fails its checksum"),
            "{err}"
        );

        let mut file = member(b"good\n");
        file.extend(b"garbage!");
        let err = Inflate::new(&file[..])
            .read_to_end(&mut Vec::new())
            .expect_err("garbage");
        assert!(
            err.to_string()
                .contains("after member 1: not the start of a gzip member"),
            "{err}"
        );
    }

    #[test]
    fn headers_with_a_name_and_extra_field_are_read() {
        let mut e = flate2::GzBuilder::new()
            .filename("r.gpumon.jsonl")
            .comment("c")
            .extra(vec![1, 2, 3])
            .write(Vec::new(), flate2::Compression::fast());
        e.write_all(b"named\n").expect("write");
        let file = e.finish().expect("finish");
        assert_eq!(drain(&mut Inflate::new(&file[..])), b"named\n");
    }
}
