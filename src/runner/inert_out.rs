//! The screen's last filter (issue 25, N7): ratatui drops C0 controls from cells, but
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

impl<W: Write> Write for InertWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Most frames are escape codes and ASCII text: nothing to look at.
        if self.pending.is_empty() && buf.is_ascii() {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut data = std::mem::take(&mut self.pending);
        data.extend_from_slice(buf);
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
        self.pending = data[end..].to_vec();
        let mut out = Vec::with_capacity(end);
        let mut i = 0;
        while i < end {
            let n = seq_len(data[i]).min(end - i);
            let piece = &data[i..i + n];
            let steering = n > 1
                && std::str::from_utf8(piece)
                    .ok()
                    .and_then(|s| s.chars().next())
                    .is_some_and(crate::fmt::is_steering);
            if !steering {
                out.extend_from_slice(piece);
            }
            i += n;
        }
        self.inner.write_all(&out)?;
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
}
