//! What the binary carries so that one installed file is a complete gpumon: the LD_PRELOAD
//! interposer (built by build.rs) and the bundled recordings. Files that other processes must
//! open by path (the interposer goes into `LD_PRELOAD`, replay reads a file) are written once
//! to a private per-user cache, in a directory named by their content hash, and compared with
//! the embedded bytes on every use, so a stale or tampered copy is never used.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The interposer as built for this binary (debug builds carry a debug interposer).
pub(crate) const PRELOAD_SO: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libgpumon_preload.so"));
pub(crate) const PRELOAD_NAME: &str = "libgpumon_preload.so";

/// The bundled recordings, by file name (`assets/`).
pub(crate) const ASSETS: &[(&str, &[u8])] = &[
    (
        "demo.gpumon.jsonl",
        include_bytes!("../assets/demo.gpumon.jsonl"),
    ),
    (
        "demo-companion.gpumon.jsonl",
        include_bytes!("../assets/demo-companion.gpumon.jsonl"),
    ),
    (
        "demo-leaks.gpumon.jsonl",
        include_bytes!("../assets/demo-leaks.gpumon.jsonl"),
    ),
    (
        "demo-grow-shrink.gpumon.jsonl",
        include_bytes!("../assets/demo-grow-shrink.gpumon.jsonl"),
    ),
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

/// A per-user cache root: code is executed from here, so it must not be writable by anyone
/// else (`$XDG_CACHE_HOME/gpumon`, `~/.cache/gpumon`, else `/tmp/gpumon-cache-UID`).
pub(crate) fn cache_root() -> PathBuf {
    let xdg = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty());
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty());
    match (xdg, home) {
        (Some(x), _) => PathBuf::from(x).join("gpumon"),
        (None, Some(h)) => PathBuf::from(h).join(".cache").join("gpumon"),
        (None, None) => PathBuf::from(format!(
            "/tmp/gpumon-cache-{}",
            crate::channel::dirs::own_uid()
        )),
    }
}

/// Write `files` under `root/dir` unless identical copies are there already; returns
/// `root/dir`. `root` is created private and refused when someone else could write to it.
pub(crate) fn write_cached(root: &Path, dir: &str, files: &[(&str, &[u8])]) -> Result<PathBuf> {
    let uid = crate::channel::dirs::own_uid();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .with_context(|| format!("creating {}", root.display()))?;
    let md = std::fs::symlink_metadata(root)?;
    if !md.is_dir() || md.uid() != uid || md.permissions().mode() & 0o022 != 0 {
        bail!(
            "{} must be a directory owned by you and not writable by others",
            root.display()
        );
    }
    let dir = root.join(dir);
    for (name, body) in files {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|b| b == *body) {
            continue;
        }
        let parent = path.parent().context("embedded file has a parent")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        // Write-then-rename: a concurrent gpumon never sees half a file.
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = parent.join(format!(".{}.{file}", std::process::id()));
        std::fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(dir)
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
            if name.ends_with(".gpumon.jsonl") {
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
        let demo = asset(&root, "demo.gpumon.jsonl")
            .expect("written")
            .expect("embedded");
        assert!(
            std::fs::read_to_string(demo)
                .expect("read")
                .starts_with('{')
        );
        assert!(asset(&root, "nope").expect("no error").is_none());
    }
}
