//! What the binary carries so that one installed file is a complete gpumon: the LD_PRELOAD
//! interposer (built by build.rs) and the bundled recordings. Files that other processes must
//! open by path (the interposer goes into `LD_PRELOAD`, replay reads a file) are written once
//! to a private per-user cache, in a directory named by their content hash, and compared with
//! the embedded bytes on every use, so a stale or tampered copy is never used. Every
//! directory from `/` down to the cache is checked first (`trusted`): nobody but root and
//! this user can swap what other processes then load by path.

mod trusted;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The interposer as built for this binary (debug builds carry a debug interposer).
pub(crate) const PRELOAD_SO: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libgpumon_preload.so"));
pub(crate) const PRELOAD_NAME: &str = "libgpumon_preload.so";

/// The bundled recordings, by file name (`assets/`).
pub(crate) const ASSETS: &[(&str, &[u8])] = &[
    (
        "demo.gpumon.jsonl.gz",
        include_bytes!("../assets/demo.gpumon.jsonl.gz"),
    ),
    (
        "demo-companion.gpumon.jsonl.gz",
        include_bytes!("../assets/demo-companion.gpumon.jsonl.gz"),
    ),
    (
        "demo-leaks.gpumon.jsonl.gz",
        include_bytes!("../assets/demo-leaks.gpumon.jsonl.gz"),
    ),
    (
        "demo-grow-shrink.gpumon.jsonl.gz",
        include_bytes!("../assets/demo-grow-shrink.gpumon.jsonl.gz"),
    ),
];

/// What a Prometheus/Grafana setup takes from gpumon, by the file name `gpumon dashboard
/// --write` gives each: shipped in the binary so that a wheel or a `cargo install` has them.
pub(crate) const MONITORING: &[(&str, &str)] = &[
    (
        "grafana-dashboard.json",
        include_str!("../assets/grafana-dashboard.json"),
    ),
    ("prometheus.yml", include_str!("../assets/prometheus.yml")),
    ("alert-rules.yml", include_str!("../assets/alert-rules.yml")),
];

/// FNV-1a over names and contents: names a cache directory after what it holds.
pub(crate) fn content_hash<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, body) in files {
        for b in name
            .bytes()
            .chain([0])
            .chain(body.iter().copied())
            .chain([0])
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A per-user cache root: code is executed from here, so neither it nor any directory
/// above it may be writable by another user (`trusted`): `$XDG_CACHE_HOME/gpumon`,
/// `~/.cache/gpumon` (`HOME`, else the home directory the user database names), else a
/// fresh private directory in /tmp. Never a fixed shared name another user could make
/// first, to have gpumon load what it put there.
pub(crate) fn cache_root() -> Result<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").and_then(abs) {
        return Ok(x.join("gpumon"));
    }
    let home = std::env::var_os("HOME")
        .and_then(abs)
        .or_else(|| passwd_home().filter(|h| h.is_dir()));
    if let Some(h) = home {
        return Ok(h.join(".cache").join("gpumon"));
    }
    // Made with a random name, private: nothing anyone made before can be in the way.
    let mut template = *b"/tmp/gpumon-cache-XXXXXX\0";
    // SAFETY: a writable NUL-terminated template, as mkdtemp requires.
    let made = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
    if made.is_null() {
        bail!(
            "no cache directory: HOME and XDG_CACHE_HOME are unset, and {}",
            std::io::Error::last_os_error()
        );
    }
    let name = &template[..template.len() - 1];
    Ok(PathBuf::from(String::from_utf8_lossy(name).into_owned()))
}

/// This user's home directory from the user database (`HOME` may be unset under cron,
/// systemd or `env -i`).
fn passwd_home() -> Option<PathBuf> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: all-zero is a valid passwd to be filled.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf outlives the copied home string.
    let rc = unsafe {
        libc::getpwuid_r(
            crate::channel::dirs::own_uid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded: pw_dir points at a NUL-terminated string inside buf.
    let dir = unsafe { std::ffi::CStr::from_ptr(pwd.pw_dir) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()))).filter(|p| p.is_absolute())
}

/// Write `files` under `root/dir` unless identical copies are there already; returns
/// `root/dir`. Every directory from `/` to each file is checked (`trusted`), each file
/// is opened without following links relative to its checked directory, compared
/// through that descriptor, and replaced (write, then rename) when it differs.
pub(crate) fn write_cached(root: &Path, dir: &str, files: &[(&str, &[u8])]) -> Result<PathBuf> {
    let uid = crate::channel::dirs::own_uid();
    let refused = |why: String| anyhow::anyhow!("cache refused: {why}");
    let root_fd = trusted::open_dir(root, uid).map_err(refused)?;
    let st = trusted::stat_fd(&root_fd)?;
    if st.st_uid != uid || st.st_mode & 0o022 != 0 {
        bail!(
            "cache refused: {} must be a directory owned by you and not writable by others",
            root.display()
        );
    }
    let dir_fd = trusted::sub_dir(&root_fd, root, OsStr::new(dir), uid).map_err(refused)?;
    let dir_path = root.join(dir);
    let reopen = |fd: &OwnedFd| trusted::open_at(fd, OsStr::new("."), libc::O_PATH, 0);
    for (name, body) in files {
        let rel = Path::new(name);
        let mut parent = reopen(&dir_fd)?;
        let mut shown = dir_path.clone();
        let Some(file) = rel.file_name() else {
            bail!("embedded file {name} has no name");
        };
        if let Some(sub) = rel.parent() {
            for part in sub.iter() {
                parent = trusted::sub_dir(&parent, &shown, part, uid).map_err(refused)?;
                shown = shown.join(part);
            }
        }
        if same_file(&parent, file, body, uid) {
            continue;
        }
        let tmp = format!(".{}.{}", std::process::id(), file.to_string_lossy());
        let tmp = OsStr::new(&tmp);
        let _ = unlink_at(&parent, tmp);
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let fd = trusted::open_at(&parent, tmp, flags, 0o644)
            .with_context(|| format!("writing {}", shown.join(tmp).display()))?;
        let mut f = std::fs::File::from(fd);
        f.write_all(body)
            .with_context(|| format!("writing {}", shown.join(tmp).display()))?;
        drop(f);
        // Write-then-rename: a concurrent gpumon never sees half a file.
        rename_at(&parent, tmp, file)
            .with_context(|| format!("writing {}", shown.join(file).display()))?;
    }
    Ok(dir_path)
}

/// Whether `dir/name` is this user's regular file, not writable by others, holding `body`
/// (read through the descriptor that was checked).
fn same_file(dir: &OwnedFd, name: &OsStr, body: &[u8], uid: u32) -> bool {
    let Ok(fd) = trusted::open_at(dir, name, libc::O_RDONLY, 0) else {
        return false;
    };
    let Ok(st) = trusted::stat_fd(&fd) else {
        return false;
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG
        || st.st_uid != uid
        || st.st_mode & 0o022 != 0
        || st.st_size as u64 != body.len() as u64
    {
        return false;
    }
    let mut have = Vec::with_capacity(body.len());
    std::fs::File::from(fd).read_to_end(&mut have).is_ok() && have == body
}

fn unlink_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
    let c = trusted::cstr(name)?;
    // SAFETY: a valid C string and descriptor.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn rename_at(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
    let (f, t) = (trusted::cstr(from)?, trusted::cstr(to)?);
    // SAFETY: valid C strings and descriptor.
    if unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The embedded interposer as a file other processes can preload.
pub(crate) fn preload_library(root: &Path) -> Result<PathBuf> {
    let dir = format!(
        "preload-{}-{}",
        env!("CARGO_PKG_VERSION"),
        env!("GPUMON_PRELOAD_HASH")
    );
    Ok(write_cached(root, &dir, &[(PRELOAD_NAME, PRELOAD_SO)])?.join(PRELOAD_NAME))
}

/// A bundled recording as a file, or None when no recording of that name is embedded.
pub(crate) fn asset(root: &Path, name: &str) -> Result<Option<PathBuf>> {
    let Some(&(name, body)) = ASSETS.iter().find(|(n, _)| *n == name) else {
        return Ok(None);
    };
    let dir = format!("assets-{:016x}", content_hash([(name, body)]));
    Ok(Some(write_cached(root, &dir, &[(name, body)])?.join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interposer_is_a_real_shared_library() {
        assert!(PRELOAD_SO.len() > 4096, "{} bytes", PRELOAD_SO.len());
        assert_eq!(&PRELOAD_SO[..4], b"\x7fELF");
    }

    #[test]
    fn every_asset_recording_is_embedded_and_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        for e in std::fs::read_dir(&dir).expect("assets") {
            let name = e.expect("entry").file_name().to_string_lossy().into_owned();
            if name.ends_with(".gpumon.jsonl.gz") {
                let on_disk = std::fs::read(dir.join(&name)).expect("read");
                let embedded = ASSETS.iter().find(|(n, _)| *n == name);
                assert!(embedded.is_some_and(|(_, b)| *b == on_disk), "{name}");
            }
        }
    }

    #[test]
    fn cached_files_are_checked_and_rewritten() {
        let tmp = tempfile::tempdir().expect("temp");
        let root = tmp.path().join("cache");
        let lib = preload_library(&root).expect("written");
        assert_eq!(std::fs::read(&lib).expect("read"), PRELOAD_SO);
        std::fs::write(&lib, b"tampered").expect("tamper");
        assert_eq!(preload_library(&root).expect("again"), lib);
        assert_eq!(std::fs::read(&lib).expect("read"), PRELOAD_SO);
        let demo = asset(&root, "demo.gpumon.jsonl.gz")
            .expect("written")
            .expect("embedded");
        // The recordings travel gzipped (148 kB instead of 1.95 MB); the reader takes either.
        let mut head = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(demo).expect("open")),
            &mut head,
        )
        .expect("gzip");
        assert!(head.starts_with("{\"type\":\"header\""), "{}", &head[..40]);
        assert!(asset(&root, "nope").expect("no error").is_none());
    }

    /// A cache under a directory everyone can write, or one whose
    /// subdirectory is open to others or a link, is refused with the reason.
    #[test]
    fn a_cache_others_could_swap_is_refused_with_why() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("temp");
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = preload_library(&shared.join("gpumon")).expect_err("refused");
        assert!(format!("{e:#}").contains("writable by everyone"), "{e:#}");
        let root = tmp.path().join("cache");
        preload_library(&root).expect("written");
        let sub = std::fs::read_dir(&root)
            .expect("root")
            .flatten()
            .next()
            .expect("a subdirectory")
            .path();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = preload_library(&root).expect_err("refused");
        assert!(format!("{e:#}").contains("not writable by others"), "{e:#}");
        std::fs::remove_dir_all(&sub).expect("rm");
        std::os::unix::fs::symlink(&shared, &sub).expect("symlink");
        let e = preload_library(&root).expect_err("refused");
        assert!(format!("{e:#}").contains("link"), "{e:#}");
    }

    #[test]
    fn without_home_the_cache_is_the_users_own_never_a_shared_name() {
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "embed::tests::print_cache_root",
                "--nocapture",
                "--ignored",
            ])
            .env_remove("HOME")
            .env_remove("XDG_CACHE_HOME")
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("root="))
            .expect("printed");
        let shared = format!("root=/tmp/gpumon-cache-{}", crate::channel::dirs::own_uid());
        assert_ne!(line, shared, "a name another user can make first");
        assert!(line.len() > "root=/".len(), "{line}");
    }

    #[test]
    #[ignore = "run by without_home_the_cache_is_the_users_own_never_a_shared_name"]
    fn print_cache_root() {
        println!("root={}", cache_root().expect("a cache root").display());
    }
}
