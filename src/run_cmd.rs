//! `gpumon run -- CMD…`: run a program with the companion inside it, no code
//! changes. The Python package is embedded in the binary, written once per
//! version to a private cache, and put on `PYTHONPATH` with a `sitecustomize`
//! shim that starts the companion and then runs the program's own
//! `sitecustomize` (python/gpumon/_shim/sitecustomize.py).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The companion package as shipped inside this binary.
pub const PY_FILES: &[(&str, &str)] = &[
    (
        "gpumon/__init__.py",
        include_str!("../python/gpumon/__init__.py"),
    ),
    (
        "gpumon/_callback_base.py",
        include_str!("../python/gpumon/_callback_base.py"),
    ),
    (
        "gpumon/_companion.py",
        include_str!("../python/gpumon/_companion.py"),
    ),
    ("gpumon/_frag.py", include_str!("../python/gpumon/_frag.py")),
    (
        "gpumon/_inbox.py",
        include_str!("../python/gpumon/_inbox.py"),
    ),
    (
        "gpumon/_paths.py",
        include_str!("../python/gpumon/_paths.py"),
    ),
    (
        "gpumon/_proto.py",
        include_str!("../python/gpumon/_proto.py"),
    ),
    (
        "gpumon/_server.py",
        include_str!("../python/gpumon/_server.py"),
    ),
    (
        "gpumon/_sources.py",
        include_str!("../python/gpumon/_sources.py"),
    ),
    ("gpumon/hf.py", include_str!("../python/gpumon/hf.py")),
    ("gpumon/keras.py", include_str!("../python/gpumon/keras.py")),
    (
        "gpumon/lightning.py",
        include_str!("../python/gpumon/lightning.py"),
    ),
    (
        "gpumon/_shim/__init__.py",
        include_str!("../python/gpumon/_shim/__init__.py"),
    ),
    (
        "gpumon/_shim/sitecustomize.py",
        include_str!("../python/gpumon/_shim/sitecustomize.py"),
    ),
];

/// Content hash of the embedded package (FNV-1a), so a cache dir never holds
/// files of another build.
fn package_hash() -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, body) in PY_FILES {
        for b in name.bytes().chain([0]).chain(body.bytes()).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A per-user cache root: code is executed from here, so it must not be
/// writable by anyone else (`$XDG_CACHE_HOME`, `~/.cache`, else `/tmp/gpumon-cache-UID`).
fn cache_root() -> PathBuf {
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

/// Write the package under `root` (once per content hash) and return the
/// directory that holds `gpumon/`.
pub fn materialize(root: &Path) -> Result<PathBuf> {
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
    let dir = root.join(format!(
        "companion-{}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        package_hash()
    ));
    for (name, body) in PY_FILES {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|b| b == body.as_bytes()) {
            continue;
        }
        let parent = path.parent().context("embedded file has a parent")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        // Write-then-rename: a concurrent `gpumon run` never sees half a file.
        let tmp = parent.join(format!(".{}.{}", std::process::id(), file_name(&path)));
        std::fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(dir)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `PYTHONPATH` for the child: shim dir, package dir, then whatever was set.
pub fn python_path(pkg: &Path, existing: Option<&OsStr>) -> OsString {
    let mut out = OsString::new();
    out.push(pkg.join("gpumon").join("_shim"));
    out.push(":");
    out.push(pkg);
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        out.push(":");
        out.push(e);
    }
    out
}

/// Environment for the native interposer. The LD_PRELOAD engineer extends
/// this (add `libgpumon_preload.so` to `LD_PRELOAD`, keeping existing entries);
/// it is applied to every `gpumon run` child after the Python settings.
pub fn preload_env(cmd: &mut Command) {
    let Some(lib) = preload_library() else {
        eprintln!(
            "gpumon run: libgpumon_preload.so not found (set GPUMON_PRELOAD or build the \
             workspace); driver-level allocations will not be reported"
        );
        return;
    };
    let mut value = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(old);
    }
    cmd.env("LD_PRELOAD", value);
}

/// `$GPUMON_PRELOAD`, else next to the gpumon binary, else `../lib` beside it.
fn preload_library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUMON_PRELOAD") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libgpumon_preload.so"),
        dir.join("../lib/libgpumon_preload.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// SIGINT from the terminal reaches the child directly (same foreground
/// process group); forwarding it too would interrupt the program twice.
fn terminal_delivers_sigint() -> bool {
    // SAFETY: plain queries on fd 0 and our own process group; no memory involved.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Run `cmd` with the companion; returns its exit code (128 + signal when killed).
pub fn run(cmd: &[OsString]) -> Result<i32> {
    run_with_cache(cmd, &cache_root())
}

fn run_with_cache(cmd: &[OsString], cache: &Path) -> Result<i32> {
    let Some((prog, args)) = cmd.split_first() else {
        bail!("usage: gpumon run -- COMMAND [ARGS...]");
    };
    let pkg = materialize(cache)?;
    let mut c = Command::new(prog);
    c.args(args);
    c.env(
        "PYTHONPATH",
        python_path(&pkg, std::env::var_os("PYTHONPATH").as_deref()),
    );
    preload_env(&mut c);
    let mut child = c
        .spawn()
        .with_context(|| format!("cannot start {}", prog.to_string_lossy()))?;
    let child_pid = child.id() as libc::pid_t;

    let mut sigs = vec![
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ];
    let tty_int = terminal_delivers_sigint();
    sigs.push(signal_hook::consts::SIGINT);
    let mut signals = signal_hook::iterator::Signals::new(&sigs)?;
    let handle = signals.handle();
    let fwd = std::thread::spawn(move || {
        for s in signals.forever() {
            if s == signal_hook::consts::SIGINT && tty_int {
                continue;
            }
            // SAFETY: sending a signal to our own child; a stale pid is
            // impossible while we have not reaped it.
            unsafe {
                libc::kill(child_pid, s);
            }
        }
    });
    let status = child.wait().context("waiting for the program")?;
    handle.close();
    let _ = fwd.join();
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_python_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
        let mut on_disk = Vec::new();
        for sub in ["gpumon", "gpumon/_shim"] {
            for e in std::fs::read_dir(root.join(sub)).expect("python package") {
                let name = e.expect("entry").file_name().to_string_lossy().into_owned();
                if name.ends_with(".py") {
                    on_disk.push(format!("{sub}/{name}"));
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = PY_FILES.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk, "add new .py files to PY_FILES");
    }

    #[test]
    fn materialize_is_private_and_idempotent() {
        let tmp = tempfile::tempdir().expect("temp");
        let root = tmp.path().join("cache");
        let dir = materialize(&root).expect("written");
        assert!(dir.join("gpumon/_shim/sitecustomize.py").is_file());
        let mode = std::fs::metadata(&root).expect("root").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // A tampered file is rewritten.
        std::fs::write(dir.join("gpumon/_frag.py"), "x").expect("tamper");
        assert_eq!(materialize(&root).expect("again"), dir);
        let back = std::fs::read_to_string(dir.join("gpumon/_frag.py")).expect("read");
        assert!(back.contains("def reduce_torch_snapshot"));
    }

    #[test]
    fn world_writable_cache_is_refused() {
        let tmp = tempfile::tempdir().expect("temp");
        let root = tmp.path().join("open");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(materialize(&root).is_err());
    }

    #[test]
    fn pythonpath_keeps_the_existing_value_last() {
        let p = python_path(Path::new("/c"), Some(OsStr::new("/a:/b")));
        assert_eq!(p, OsString::from("/c/gpumon/_shim:/c:/a:/b"));
        assert_eq!(
            python_path(Path::new("/c"), Some(OsStr::new(""))),
            OsString::from("/c/gpumon/_shim:/c")
        );
    }

    #[test]
    fn exit_codes_and_the_companion_inside() {
        let tmp = tempfile::tempdir().expect("temp");
        let cache = tmp.path().join("cache");
        let run = |cmd: &[OsString]| run_with_cache(cmd, &cache);
        let code = run(&[
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from("exit 7"),
        ])
        .expect("runs");
        assert_eq!(code, 7);
        let code = run(&[
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from("kill -TERM $$"),
        ])
        .expect("runs");
        assert_eq!(code, 128 + 15);
        let has_python = Command::new("python3")
            .arg("-c")
            .arg("import sys; assert sys.version_info >= (3, 9)")
            .status()
            .is_ok_and(|s| s.success());
        if has_python {
            let sock = tmp.path().join("s");
            std::fs::create_dir(&sock).expect("mkdir");
            std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o700)).expect("chmod");
            let script = format!(
                "import os, gpumon; c = gpumon.companion(); \
                 assert c is not None and c.thread is not None; \
                 assert os.path.dirname(c.path) == {:?}; raise SystemExit(3)",
                sock.display().to_string()
            );
            let code = run(&[
                OsString::from("env"),
                OsString::from(format!("GPUMON_DIR={}", sock.display())),
                OsString::from("python3"),
                OsString::from("-c"),
                OsString::from(script),
            ])
            .expect("runs");
            assert_eq!(code, 3, "python saw the companion started by the shim");
        }
    }
}
