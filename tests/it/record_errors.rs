//! Write errors are loud: a recorder that cannot write stops
//! with one line on stderr and a non-zero exit, and the file ends at a line
//! boundary so it replays. Before: exit 0 and silence on a full disk, death by
//! SIGXFSZ without a word under `ulimit -f`.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::support::channel::{HELLO, private_dir};
use crate::support::serial::flood;

/// A companion (this test process, so the socket is named after our pid)
/// that floods whoever connects.
fn flooding_companion(dir: &Path) {
    let l = UnixListener::bind(dir.join(format!("{}.sock", std::process::id()))).expect("bind");
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = l.accept() {
            std::thread::spawn(move || {
                if writeln!(s, "{HELLO}").is_err() {
                    return;
                }
                // Samples on 16 devices with ~900 bytes of reasons each: what the
                // channel and recording budgets let through is still ~300 KB/s.
                // Random hex, so that gzip shrinks it only about 2x.
                let mut x = u64::from(std::process::id()) | 1;
                let mut pad = String::with_capacity(900);
                for i in 0u64.. {
                    pad.clear();
                    while pad.len() < 900 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        pad.push_str(&format!("{x:016x}"));
                    }
                    let dev = i % 16;
                    let line = format!(
                        r#"{{"v":1,"type":"sample","dev":{dev},"allocated":{i},"na":{{"x":"{pad}"}}}}"#
                    );
                    if writeln!(s, "{line}").is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// Run `gpumon record` into `out` (gzip, or plain with `--format ndjson` in `extra`);
/// returns (exit code, stderr, seconds taken).
fn record(
    sockets: &Path,
    out: &Path,
    fsize_limit: Option<u64>,
    extra: &[&str],
) -> (Option<i32>, String, f64) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpumon"));
    cmd.args([
        "record",
        "--duration",
        "20s",
        "--interval",
        "100ms",
        "--socket-dir",
    ])
    .arg(sockets)
    .arg("-o")
    .arg(out)
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if let Some(limit) = fsize_limit {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child yet.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let t = Instant::now();
    let o = cmd.output().expect("run gpumon");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t.elapsed().as_secs_f64(),
    )
}

/// `limit`: the file-size limit, under which a compressed file must be closed unless
/// the ten closing bytes did not fit (a full disk may refuse them anywhere).
fn assert_loud_and_replayable(
    code: Option<i32>,
    stderr: &str,
    secs: f64,
    out: &Path,
    why: &str,
    limit: Option<u64>,
) {
    assert_eq!(
        code,
        Some(1),
        "exit status (None = killed by a signal); stderr: {stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("recording stopped"))
        .unwrap_or_else(|| panic!("no message; stderr: {stderr}"));
    assert!(line.contains(why), "{line}");
    assert!(
        secs < 10.0,
        "kept running {secs:.1} s after the disk refused"
    );
    let bytes = std::fs::read(out).expect("read recording");
    assert!(!bytes.is_empty());
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        // Cut at its last flush and closed there, a whole gzip file as any tool reads it;
        // only where the ten closing bytes did not fit under the limit is it left open.
        let mut t = Vec::new();
        let whole =
            std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut t);
        if let Err(e) = whole {
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
            if let Some(limit) = limit {
                assert!(
                    bytes.len() as u64 + 10 > limit,
                    "left open with room to close"
                );
            }
        }
        t
    } else {
        bytes
    };
    assert_eq!(text.last(), Some(&b'\n'), "file ends mid-line");
    let replay = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless"])
        .arg(out)
        .output()
        .expect("replay");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

#[test]
fn a_file_size_limit_stops_the_recorder_loudly() {
    let _flood = flood();
    let sockets = private_dir();
    flooding_companion(sockets.path());
    let out_dir = tempfile::tempdir().expect("temp dir");
    let out = out_dir.path().join("r.jsonl");
    let (code, stderr, secs) = record(
        sockets.path(),
        &out,
        Some(64 * 1024),
        &["--format", "ndjson"],
    );
    assert_loud_and_replayable(code, &stderr, secs, &out, "File too large", Some(64 * 1024));
    assert!(std::fs::metadata(&out).expect("stat").len() <= 64 * 1024);
}

#[test]
fn a_file_size_limit_stops_a_compressed_recorder_loudly() {
    let _flood = flood();
    let sockets = private_dir();
    flooding_companion(sockets.path());
    let out_dir = tempfile::tempdir().expect("temp dir");
    let out = out_dir.path().join("r.gpumon.jsonl.gz");
    let (code, stderr, secs) = record(sockets.path(), &out, Some(GZ_LIMIT), &[]);
    assert_loud_and_replayable(code, &stderr, secs, &out, "File too large", Some(GZ_LIMIT));
    assert!(std::fs::metadata(&out).expect("stat").len() <= GZ_LIMIT);
}

/// A full disk: a 256 KiB tmpfs (needs root to mount; skipped otherwise).
#[test]
fn a_full_disk_stops_the_recorder_loudly() {
    let _flood = flood();
    let sockets = private_dir();
    let mnt = tempfile::tempdir().expect("temp dir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(mnt.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(mnt.path());
    flooding_companion(sockets.path());
    let out = mnt.path().join("r.gpumon.jsonl.gz");
    let (code, stderr, secs) = record(sockets.path(), &out, None, &[]);
    assert_loud_and_replayable(code, &stderr, secs, &out, "No space left on device", None);
}

/// The compressed test's limit: what the flood fills in a few seconds.
const GZ_LIMIT: u64 = 64 * 1024;

/// Sanity of the harness: without a limit the same run keeps going (so the
/// tests above fail for the reason they name). Bounded by --duration.
#[test]
fn without_a_limit_the_recording_runs_on() {
    let _flood = flood();
    let sockets = private_dir();
    flooding_companion(sockets.path());
    let out_dir = tempfile::tempdir().expect("temp dir");
    for (name, format, limit) in [("r.jsonl", "ndjson", 64 * 1024), ("r.gz", "gz", GZ_LIMIT)] {
        let out = out_dir.path().join(name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
            .args([
                "record",
                "--duration",
                "2s",
                "--format",
                format,
                "--socket-dir",
            ])
            .arg(sockets.path())
            .arg("-o")
            .arg(&out)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let status = child.wait().expect("wait");
        assert!(status.success());
        let len = std::fs::metadata(&out).expect("stat").len();
        eprintln!("{format}: {len} bytes in 2 s");
        assert!(len > limit, "{format}: {len} bytes");
    }
}
