//! `gpumon run -- CMD…`: run a program with the companion inside it, no code
//! changes. The Python package is embedded in the binary, written once per
//! version to a private cache, and put on `PYTHONPATH` with a `sitecustomize`
//! shim that starts the companion and then runs the program's own
//! `sitecustomize` (python/gpumon/_shim/sitecustomize.py).

use std::ffi::{OsStr, OsString};
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::embed;

/// The companion package as shipped inside this binary.
pub(crate) const PY_FILES: &[(&str, &str)] = &[
    (
        "gpumon/__init__.py",
        include_str!("../python/gpumon/__init__.py"),
    ),
    (
        "gpumon/__main__.py",
        include_str!("../python/gpumon/__main__.py"),
    ),
    (
        "gpumon/_callback_base.py",
        include_str!("../python/gpumon/_callback_base.py"),
    ),
    (
        "gpumon/_companion.py",
        include_str!("../python/gpumon/_companion.py"),
    ),
    (
        "gpumon/_epochgc.py",
        include_str!("../python/gpumon/_epochgc.py"),
    ),
    ("gpumon/_frag.py", include_str!("../python/gpumon/_frag.py")),
    (
        "gpumon/_helpers.py",
        include_str!("../python/gpumon/_helpers.py"),
    ),
    (
        "gpumon/_inbox.py",
        include_str!("../python/gpumon/_inbox.py"),
    ),
    (
        "gpumon/_loggers.py",
        include_str!("../python/gpumon/_loggers.py"),
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
        "gpumon/_selftime.py",
        include_str!("../python/gpumon/_selftime.py"),
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

/// Write the package under `root` (once per content hash) and return the
/// directory that holds `gpumon/`.
pub(crate) fn materialize(root: &Path) -> Result<PathBuf> {
    let files: Vec<(&str, &[u8])> = PY_FILES.iter().map(|(n, b)| (*n, b.as_bytes())).collect();
    let dir = format!(
        "companion-{}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        embed::content_hash(files.iter().copied())
    );
    embed::write_cached(root, &dir, &files)
}

/// `PYTHONPATH` for the child: shim dir, package dir, then whatever was set.
pub(crate) fn python_path(pkg: &Path, existing: Option<&OsStr>) -> OsString {
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

/// Put the interposer first in the child's `LD_PRELOAD`, keeping existing entries:
/// `$GPUMON_PRELOAD` when set (a library built elsewhere), else the copy embedded in this
/// binary, written to the cache (src/embed.rs says why it is embedded).
pub(crate) fn preload_env(cmd: &mut Command, cache: &Path) {
    let lib = match std::env::var_os("GPUMON_PRELOAD").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => match embed::preload_library(cache) {
            Ok(p) => p,
            Err(e) => {
                crate::say!(
                    "gpumon run: cannot write the interposer ({e:#}); driver-level allocations \
                     will not be reported"
                );
                return;
            }
        },
    };
    let mut value = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(old);
    }
    cmd.env("LD_PRELOAD", value);
}

/// SIGINT from the terminal reaches the child directly (same foreground
/// process group); forwarding it too would interrupt the program twice.
fn terminal_delivers_sigint() -> bool {
    // SAFETY: plain queries on fd 0 and our own process group; no memory involved.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Run `cmd` with the companion; returns its exit code (128 + signal when killed).
pub(crate) fn run(cmd: &[OsString]) -> Result<i32> {
    run_with_cache(cmd, &embed::cache_root()?)
}

/// Exit status when the program cannot be started, as POSIX shells report it.
pub(crate) const NOT_FOUND: i32 = 127;
pub(crate) const NOT_EXECUTABLE: i32 = 126;

/// ld.so splits `LD_PRELOAD` at spaces and colons, Python splits `PYTHONPATH` at colons:
/// a path with either would load other files, so it is refused.
pub(crate) fn list_safe(path: &Path, what: &str) -> Result<()> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if let Some(&b) = bytes
        .iter()
        .find(|b| matches!(b, b' ' | b':' | b'\t' | b'\n'))
    {
        let which = match b {
            b':' => "a colon",
            b' ' => "a space",
            _ => "a tab or line break",
        };
        bail!(
            "{what} '{}' contains {which}: LD_PRELOAD and PYTHONPATH split paths there, so \
             the program would load other files. Set XDG_CACHE_HOME (or GPUMON_PRELOAD) to a \
             path without spaces or colons",
            crate::fmt::quote(&path.to_string_lossy())
        );
    }
    Ok(())
}

fn run_with_cache(cmd: &[OsString], cache: &Path) -> Result<i32> {
    let Some((prog, args)) = cmd.split_first() else {
        bail!("usage: gpumon run -- COMMAND [ARGS...]");
    };
    list_safe(cache, "the cache directory")?;
    if let Some(p) = std::env::var_os("GPUMON_PRELOAD").filter(|v| !v.is_empty()) {
        list_safe(Path::new(&p), "GPUMON_PRELOAD")?;
    }
    let pkg = materialize(cache)?;
    let mut c = Command::new(prog);
    c.args(args);
    c.env(
        "PYTHONPATH",
        python_path(&pkg, std::env::var_os("PYTHONPATH").as_deref()),
    );
    preload_env(&mut c, cache);
    let mut child = match c.spawn() {
        Ok(child) => child,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::NotFound => NOT_FOUND,
                ErrorKind::PermissionDenied => NOT_EXECUTABLE,
                _ => {
                    return Err(e)
                        .with_context(|| format!("cannot start {}", prog.to_string_lossy()));
                }
            };
            crate::say!("gpumon run: {}: {e}", prog.to_string_lossy());
            return Ok(code);
        }
    };
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
    use std::os::unix::fs::PermissionsExt;

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
    fn the_python_version_is_cargos() {
        // Cargo.toml is the one version source (the wheel takes it from there); the
        // companion's `__version__` must say the same.
        let init = PY_FILES
            .iter()
            .find(|(n, _)| *n == "gpumon/__init__.py")
            .map(|(_, b)| *b)
            .unwrap_or_default();
        let line = format!("__version__ = \"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(
            init.lines().any(|l| l == line),
            "python/gpumon/__init__.py needs {line}"
        );
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
    fn a_missing_or_unexecutable_program_exits_like_a_shell() {
        let tmp = tempfile::tempdir().expect("temp");
        let cache = tmp.path().join("cache");
        let missing = run_with_cache(&[OsString::from("/nonexistent/gpumon-test")], &cache);
        assert_eq!(missing.expect("reported as a status"), NOT_FOUND);
        let plain = tmp.path().join("plain.txt");
        std::fs::write(&plain, "not a program").expect("write");
        let denied = run_with_cache(&[plain.into_os_string()], &cache);
        assert_eq!(denied.expect("reported as a status"), NOT_EXECUTABLE);
    }

    #[test]
    fn world_writable_cache_is_refused() {
        let tmp = tempfile::tempdir().expect("temp");
        let root = tmp.path().join("open");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(materialize(&root).is_err());
    }

    /// A space in the cache path split LD_PRELOAD into two files, one of
    /// them planted by another user. Refused before anything runs, saying why.
    #[test]
    fn a_cache_path_with_a_space_or_colon_is_refused_before_the_program_runs() {
        let tmp = tempfile::tempdir().expect("temp");
        for bad in ["my cache", "a:b"] {
            let cache = tmp.path().join(bad).join("gpumon");
            let marker = tmp.path().join("ran");
            let e = run_with_cache(
                &[OsString::from("touch"), marker.clone().into_os_string()],
                &cache,
            )
            .expect_err("refused");
            let text = format!("{e:#}");
            assert!(text.contains("XDG_CACHE_HOME"), "{text}");
            assert!(!marker.exists(), "the program ran with a split path");
        }
        assert!(list_safe(Path::new("/home/u/.cache/gpumon"), "x").is_ok());
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
