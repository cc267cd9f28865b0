//! The screen's last filter: ratatui drops C0 controls from cells, but
//! zero-width characters ride along with the cell before them, so a bidi override
//! (U+202E) or isolate (U+2066) in a process name or a companion's text reached the
//! terminal and reordered what followed it. Every byte the UI writes passes here, and
//! the UTF-8 forms of `fmt::is_steering`'s multi-byte characters are dropped. They take
//! no columns, so the layout is unchanged; ASCII passes untouched (the backend's own
//! escape sequences are ASCII).

use std::io::{self, Write};

pub(crate) struct InertWriter<W: Write> {
    inner: W,
    /// The start of a UTF-8 sequence cut by the end of the last write.
    pending: Vec<u8>,
}

impl<W: Write> InertWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        InertWriter {
            inner,
            pending: Vec::new(),
        }
    }
}

/// Length of the UTF-8 sequence a lead byte starts (1 for ASCII and stray bytes).
fn seq_len(b: u8) -> usize {
    match b {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// Whether one UTF-8 sequence is a steering character (`fmt::is_steering`) of more than one
/// byte: C1 controls, U+061C, U+200B-200F, U+2028-202E, U+2060-2069, U+FEFF, U+FFF9-FFFB.
/// Spelled as bytes because a frame is mostly braille and box drawing (three bytes from
/// 0xE2): decoding each of them to ask was a twentieth of a live redraw. A test
/// holds this to `is_steering` for every character.
fn steers(seq: &[u8]) -> bool {
    match *seq {
        [0xC2, b] => b < 0xA0,
        [0xD8, 0x9C] => true,
        [0xE2, 0x80, b] => matches!(b, 0x8B..=0x8F | 0xA8..=0xAE),
        [0xE2, 0x81, b] => matches!(b, 0xA0..=0xA9),
        [0xEF, 0xBB, 0xBF] => true,
        [0xEF, 0xBF, b] => matches!(b, 0xB9..=0xBB),
        _ => false,
    }
}

impl<W: Write> Write for InertWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Most frames are escape codes and ASCII text: nothing to look at.
        if self.pending.is_empty() && buf.is_ascii() {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let joined;
        let data = if self.pending.is_empty() {
            buf
        } else {
            let mut d = std::mem::take(&mut self.pending);
            d.extend_from_slice(buf);
            joined = d;
            &joined[..]
        };
        // Hold back a sequence the next write completes.
        let mut end = data.len();
        for back in 1..=3.min(data.len()) {
            let i = data.len() - back;
            let n = seq_len(data[i]);
            if data[i] >= 0xC0 {
                if n > back {
                    end = i;
                }
                break;
            }
        }
        // What is kept is written as it stands, in runs between the sequences dropped.
        let mut run = 0;
        let mut i = 0;
        while i < end {
            if data[i] < 0x80 {
                i += 1;
                continue;
            }
            let n = seq_len(data[i]).min(end - i);
            if steers(&data[i..i + n]) {
                self.inner.write_all(&data[run..i])?;
                run = i + n;
            }
            i += n;
        }
        self.inner.write_all(&data[run..end])?;
        self.pending = data[end..].to_vec();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_and_zero_width_are_dropped_at_any_cut_and_the_rest_is_kept() {
        let text = "\x1b[1;1Hpython3 ab\u{202E}cd\u{2066}e\u{200B}f\u{9b}g █ ü ✓ 😀\x1b[0m";
        let bytes = text.as_bytes();
        for chunk in 1..=5 {
            let mut w = InertWriter::new(Vec::new());
            for c in bytes.chunks(chunk) {
                w.write_all(c).expect("write");
            }
            assert_eq!(
                String::from_utf8(w.inner).expect("utf-8"),
                "\x1b[1;1Hpython3 abcdefg █ ü ✓ 😀\x1b[0m",
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn the_bytes_checked_are_exactly_the_steering_characters_of_several_bytes() {
        for c in ('\u{80}'..=char::MAX).filter(|c| !c.is_ascii()) {
            let mut b = [0; 4];
            let seq = c.encode_utf8(&mut b).as_bytes();
            assert_eq!(steers(seq), crate::fmt::is_steering(c), "{:?}", c);
        }
    }
}
