//! Every file gpumon writes (the report, recordings, CSV, JSONL, alert logs, man pages) is
//! opened here, so that none can be turned against the user who runs it (often root):
//!
//! - a regular file (or a name not there yet) is replaced: the new content goes into a temp
//!   file created beside it with `O_CREAT | O_EXCL | O_NOFOLLOW` under a random name, mode
//!   0600 until it is complete, then renamed over the name. A link planted at the temp
//!   name makes the create fail (another name is tried), so nothing is written through it;
//!   a link at the name itself is replaced, its target never written.
//! - anything else (`/dev/null`, `/dev/stdout`, a terminal, a FIFO, a socket) is written
//!   in place: renaming a regular file over `/dev/null` as root would replace the device.
//!
//! A `Replace` that is dropped before `commit` removes its temp file. Whole files
//! (`write_whole`) appear at once or not at all; streams (`open_stream`) are renamed into
//! place at once, empty, and written from there, so a follower sees them grow.

use std::ffi::OsString;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Names tried before giving up (each is random: only a name taken by chance or planted
/// fails, so this bounds a directory filled with planted names, not a normal run).
const ATTEMPTS: u32 = 64;

/// A file being written to take `dest`'s place.
pub struct Replace {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
    /// The mode the file gets once complete.
    mode: u32,
    done: bool,
}

/// Where writes for `dest` go.
pub enum Target {
    /// A new file that replaces `dest` on `commit`.
    Replace(Replace),
    /// `dest` itself, which is not a regular file (a device, a FIFO, a terminal).
    InPlace(File),
}

impl Target {
    /// Open `dest` for writing as the module says.
    pub fn open(dest: &Path) -> io::Result<Target> {
        if let Some(f) = open_special(dest)? {
            return Ok(Target::InPlace(f));
        }
        Ok(Target::Replace(Replace::new(dest)?))
    }

    pub fn file(&mut self) -> &mut File {
        match self {
            Target::Replace(r) => r.file.as_mut().expect("open until committed"),
            Target::InPlace(f) => f,
        }
    }

    /// Make the written content `dest`'s (rename, or nothing for a file written in place).
    pub fn commit(self) -> io::Result<File> {
        match self {
            Target::Replace(r) => r.commit(),
            Target::InPlace(f) => Ok(f),
        }
    }
}

/// Write `bytes` as the whole content of `dest`: it appears complete or not at all (on an
/// error, a full disk, EFBIG past `ulimit -f` with SIGXFSZ ignored, no temp file is left).
pub fn write_whole(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut t = Target::open(dest)?;
    t.file().write_all(bytes)?;
    t.file().flush()?;
    t.commit()?;
    Ok(())
}

/// A file to stream into (a recording, CSV rows, alert lines): `dest` is replaced by a
/// new empty file at once, or opened in place when it is not a regular file.
pub fn open_stream(dest: &Path) -> io::Result<File> {
    Target::open(dest)?.commit()
}

/// How `dest` is written, from what is there now.
enum Kind {
    Replace,
    InPlace,
}

/// Links followed while deciding, at most.
const MAX_HOPS: usize = 8;

/// Whether `dest` is replaced or written in place. A link is followed only when it belongs
/// to this user or root (a link another user planted in a shared directory is replaced,
/// never followed: it could point at `/dev/sda`); what it leads to decides. A regular
/// file is replaced, except under `/dev/` or `/proc/` (`/dev/stdout` when stdout is
/// redirected to a file: written through, as the shell's `>` opened it).
fn kind(dest: &Path) -> io::Result<Kind> {
    use std::os::unix::fs::MetadataExt;
    let euid = unsafe_geteuid();
    let mut at = dest.to_path_buf();
    for _ in 0..=MAX_HOPS {
        // Devices and the process's own descriptors (`/proc/self/fd/1` is a link to
        // `pipe:[…]`, not a path): opened as they are, never created or replaced.
        if at.starts_with("/dev") || at.starts_with("/proc") {
            return Ok(Kind::InPlace);
        }
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::Replace),
            Err(e) => return Err(e),
        };
        let t = m.file_type();
        if t.is_symlink() {
            if m.uid() != euid && m.uid() != 0 {
                return Ok(Kind::Replace);
            }
            let to = std::fs::read_link(&at)?;
            at = match at.parent() {
                Some(dir) => dir.join(to),
                None => to,
            };
            continue;
        }
        return if t.is_dir() {
            Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ))
        } else if t.is_block_device() {
            Err(io::Error::other("is a block device: not written"))
        } else if t.is_file() {
            Ok(Kind::Replace)
        } else {
            Ok(Kind::InPlace)
        };
    }
    Ok(Kind::Replace)
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `dest` opened for writing in place when it is not a file to replace.
fn open_special(dest: &Path) -> io::Result<Option<File>> {
    if matches!(kind(dest)?, Kind::Replace) {
        return Ok(None);
    }
    // No O_TRUNC: a device or pipe has nothing to cut, and a regular file behind /dev/stdout
    // was cut by the shell that opened it.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(dest)?;
    // Swapped between the look and the open (a directory others can write to): refused.
    if f.metadata()?.file_type().is_block_device() {
        return Err(io::Error::other("is a block device: not written"));
    }
    Ok(Some(f))
}

impl Replace {
    fn new(dest: &Path) -> io::Result<Replace> {
        Replace::named(dest, random)
    }

    /// With the temp names' random part drawn from `next`.
    fn named(dest: &Path, mut next: impl FnMut() -> u64) -> io::Result<Replace> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        // A file already there keeps its permission bits (not set-id ones); a new one gets
        // 0666 less the umask, as `open(O_CREAT)` would have given it.
        let mode = match std::fs::symlink_metadata(dest) {
            Ok(m) if m.is_file() => m.permissions().mode() & 0o777,
            _ => 0o666 & !umask(),
        };
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let mut tmp_name = OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{:016x}.tmp", next()));
            let tmp = dir.join(&tmp_name);
            match std::fs::OpenOptions::new()
                .write(true)
                .read(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(Replace {
                        file: Some(file),
                        tmp,
                        dest: dest.to_path_buf(),
                        mode,
                        done: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
    }

    fn commit(mut self) -> io::Result<File> {
        let file = self.file.take().expect("open until committed");
        file.set_permissions(std::fs::Permissions::from_mode(self.mode))?;
        std::fs::rename(&self.tmp, &self.dest)?;
        self.done = true;
        Ok(file)
    }
}

impl Drop for Replace {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The process's umask, read without changing it (`/proc/self/status`); 022 when unknown.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// 64 unpredictable bits: std's hasher keys are drawn from the OS's random source.
fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_planted_at_the_temp_name_is_never_written_through() {
        let d = tempfile::tempdir().expect("dir");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "secret").expect("write");
        let p = d.path().join("r.html");
        // The attacker guessed the first name: the create fails there and the next is used.
        symlink(&victim, d.path().join(format!(".r.html.{:016x}.tmp", 1))).expect("plant");
        let mut names = [1u64, 2].into_iter();
        let mut t =
            Target::Replace(Replace::named(&p, || names.next().expect("a name")).expect("open"));
        t.file().write_all(b"page").expect("write");
        t.commit().expect("commit");
        assert_eq!(std::fs::read(&victim).expect("read"), b"secret");
        assert_eq!(std::fs::read(&p).expect("read"), b"page");
        // Every name planted: refused, nothing written anywhere.
        let err = Replace::named(&p, || 1).err().expect("refused");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).expect("read"), b"secret");
    }

    #[test]
    fn a_link_another_user_planted_is_replaced_not_followed() {
        // Owned by us, a link to a device is followed (that is /dev/stdout's case); the
        // owner check itself needs two users: tests/it/safe_output.rs runs it as root.
        let d = tempfile::tempdir().expect("dir");
        let p = d.path().join("out");
        symlink("/dev/null", &p).expect("link");
        assert!(matches!(kind(&p).expect("kind"), Kind::InPlace));
        assert!(matches!(
            kind(Path::new("/dev/stdout")).expect("kind"),
            Kind::InPlace
        ));
        assert!(kind(Path::new("/")).is_err(), "a directory");
    }

    #[test]
    fn a_new_file_appears_whole_with_the_usual_mode_and_no_temp_is_left() {
        let d = tempfile::tempdir().expect("dir");
        let p = d.path().join("r.html");
        write_whole(&p, b"page").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"page");
        let mode = std::fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
        assert_eq!(std::fs::read_dir(d.path()).expect("ls").count(), 1);
    }

    #[test]
    fn an_existing_file_keeps_its_mode() {
        let d = tempfile::tempdir().expect("dir");
        let p = d.path().join("r.html");
        std::fs::write(&p, "old").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        write_whole(&p, b"new").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"new");
        let mode = std::fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn a_link_at_the_name_is_replaced_and_its_target_untouched() {
        let d = tempfile::tempdir().expect("dir");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "secret").expect("write");
        let p = d.path().join("r.html");
        symlink(&victim, &p).expect("link");
        write_whole(&p, b"page").expect("write");
        assert_eq!(std::fs::read(&victim).expect("read"), b"secret");
        assert!(std::fs::symlink_metadata(&p).expect("stat").is_file());
    }

    #[test]
    fn a_dropped_replace_leaves_nothing() {
        let d = tempfile::tempdir().expect("dir");
        let p = d.path().join("r.html");
        let mut t = Target::open(&p).expect("open");
        t.file().write_all(b"half").expect("write");
        drop(t);
        assert_eq!(std::fs::read_dir(d.path()).expect("ls").count(), 0);
    }

    #[test]
    fn devices_and_fifos_are_written_in_place_never_replaced() {
        // The machine's devices are only looked at here (a regression must not replace
        // them); tests/it/safe_output.rs writes to private copies.
        assert!(matches!(
            kind(Path::new("/dev/null")).expect("kind"),
            Kind::InPlace
        ));
        assert!(matches!(
            kind(Path::new("/dev/full")).expect("kind"),
            Kind::InPlace
        ));
        let d = tempfile::tempdir().expect("dir");
        let fifo = d.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).expect("path");
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = std::thread::spawn({
            let fifo = fifo.clone();
            move || std::fs::read(fifo).expect("read fifo")
        });
        write_whole(&fifo, b"through the pipe").expect("fifo");
        assert_eq!(reader.join().expect("reader"), b"through the pipe");
        assert!(
            std::fs::symlink_metadata(&fifo)
                .expect("stat")
                .file_type()
                .is_fifo()
        );
    }
}
