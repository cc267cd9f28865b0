//! An output of whole lines (CSV rows, JSON lines, alert lines) that fails
//! loudly and leaves a file that ends at a line.
//!
//! Each batch (a tick's rows, one alert) goes out in one `write_all` and is
//! flushed. When a write fails (ENOSPC, EFBIG past `ulimit -f` with SIGXFSZ
//! ignored, EIO) the file is cut back to the end of the last whole batch —
//! shrinking needs no space — and nothing more is written to it: a later write
//! that fits once space frees up would follow half a line.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

pub struct LineFile {
    out: Box<dyn Write + Send>,
    /// The file behind `out`, when it is one, to cut it after a failed write.
    file: Option<File>,
    /// How messages name it: the path, or `stdout`.
    name: String,
    /// Bytes of whole batches written.
    written: u64,
    /// Set after a failed write: everything later is refused.
    failed: bool,
}

impl LineFile {
    /// Create `path` anew (`fmt::out_file`: a new file renamed into place, or a device or
    /// FIFO written in place).
    pub fn create(path: &Path) -> io::Result<LineFile> {
        let file = crate::fmt::out_file::open_stream(path)?;
        let cut = file.try_clone()?;
        Ok(LineFile {
            out: Box::new(file),
            file: Some(cut),
            name: path.display().to_string(),
            written: 0,
            failed: false,
        })
    }

    /// Any writer (stdout, a test's buffer): not cut after an error.
    pub fn new(out: Box<dyn Write + Send>, name: &str) -> LineFile {
        LineFile {
            out,
            file: None,
            name: name.into(),
            written: 0,
            failed: false,
        }
    }

    /// Write `batch` (whole lines) and flush. On an error the file is cut back
    /// to its last whole batch and the error names the file; later calls fail.
    pub fn write_lines(&mut self, batch: &[u8]) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other(format!(
                "{}: closed after a write error",
                self.name
            )));
        }
        match self.out.write_all(batch).and_then(|()| self.out.flush()) {
            Ok(()) => {
                self.written += batch.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                if let Some(f) = &self.file {
                    let _ = f.set_len(self.written);
                }
                Err(io::Error::new(
                    e.kind(),
                    format!("cannot write {}: {e}", self.name),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `room` bytes, then refuses as a full disk does.
    struct Full {
        file: File,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.file.write(&b[..n])
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_refused_batch_is_cut_off_and_named_and_nothing_follows() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("rows.csv");
        let mut lf = LineFile::create(&path).expect("create");
        lf.out = Box::new(Full {
            file: File::options().write(true).open(&path).expect("open"),
            room: 10,
        });
        lf.write_lines(b"a,b\n1,2\n").expect("fits");
        let err = lf.write_lines(b"3,4\n5,6\n7,8\n").expect_err("full");
        assert!(
            err.to_string()
                .starts_with(&format!("cannot write {}: No space left", path.display())),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).expect("read"), b"a,b\n1,2\n");
        assert!(lf.write_lines(b"9,9\n").is_err());
        assert_eq!(std::fs::read(&path).expect("read"), b"a,b\n1,2\n");
    }
}
