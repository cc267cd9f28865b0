//! Shared by the integration tests and the overhead benchmark: building the
//! stand-in libcuda and C programs with `cc`, finding the interposer, and a
//! minimal monitor that speaks the protocol's handshake.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// `libgpumon_preload.so` as cargo built it for this test run.
pub fn preload_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let p = dir.join("libgpumon_preload.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libgpumon_preload.so not found next to {}", exe.display());
}

fn cc(args: &[&str]) {
    let out = Command::new("cc").args(args).output().expect("run cc");
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the stand-in `libcuda.so.1` into `dir`.
pub fn build_fake_cuda(dir: &Path) -> PathBuf {
    let lib = dir.join("libcuda.so.1");
    let src = c_dir().join("fake_cuda.c");
    cc(&[
        "-shared",
        "-fPIC",
        "-O2",
        "-Wl,-soname,libcuda.so.1",
        "-o",
        lib.to_str().expect("utf8"),
        src.to_str().expect("utf8"),
    ]);
    lib
}

/// Builds a C program linked against the stand-in in `dir`.
pub fn build_program(dir: &Path, src: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    let d = dir.to_str().expect("utf8");
    cc(&[
        "-O2",
        "-o",
        exe.to_str().expect("utf8"),
        src.to_str().expect("utf8"),
        &format!("-L{d}"),
        "-l:libcuda.so.1",
        "-ldl",
        &format!("-Wl,-rpath,{d}"),
    ]);
    exe
}

/// A monitor connection after the handshake.
pub struct Monitor {
    reader: BufReader<UnixStream>,
}

impl Monitor {
    pub fn connect(sock: &Path) -> Monitor {
        let mut s = UnixStream::connect(sock).expect("connect");
        s.write_all(
            b"{\"v\":1,\"type\":\"hello\",\"role\":\"monitor\",\"min_v\":1,\"max_v\":1,\"client\":\"test\"}\n",
        )
        .expect("hello");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        Monitor {
            reader: BufReader::new(s),
        }
    }

    /// Reads messages until `stop` says so (or `limit` passes); returns them all.
    pub fn read_until(
        &mut self,
        limit: Duration,
        mut stop: impl FnMut(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        let mut out = Vec::new();
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {
                    assert!(line.len() <= 65_536, "line over the protocol limit");
                    let v: Value = serde_json::from_str(&line).expect("valid JSON line");
                    let done = stop(&v);
                    out.push(v);
                    if done {
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        out
    }
}

/// Waits for the one socket file a process creates in `dir`.
pub fn wait_for_socket(dir: &Path, pid: u32) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for name in [format!("{pid}.sock"), format!("{pid}.driver.sock")] {
            let p = dir.join(name);
            if p.exists() {
                return p;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no socket for pid {pid} in {}", dir.display());
}

pub fn msg_type(v: &Value) -> &str {
    v["type"].as_str().unwrap_or("")
}
