//! The interposer loaded into a real program against a stand-in libcuda: every
//! way of reaching the driver is seen, every call passes through unchanged, and
//! a monitor gets the protocol's messages.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    build_fake_cuda(dir.path());
    let exe = build_program(dir.path(), &c_dir().join("paths.c"), "paths");
    (dir, exe)
}

/// Runs the program to the end, answering its "ready" at once.
fn run_plain(exe: &Path, envs: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(exe);
    cmd.envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(mut i) = child.stdin.take() {
        i.write_all(b"go\n").expect("stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "program failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf8")
}

#[derive(Debug, Clone, PartialEq)]
struct Alloc {
    kind: String,
    dev: u64,
    size: u64,
    ptr: u64,
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or("")
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

/// The successful allocations the program reports on stdout.
fn expected(stdout: &str) -> Vec<Alloc> {
    stdout
        .lines()
        .filter(|l| l.starts_with("alloc ") && field(l, "rc") == "0")
        .map(|l| Alloc {
            kind: field(l, "kind").to_string(),
            dev: field(l, "dev").parse().expect("dev"),
            size: field(l, "size").parse().expect("size"),
            ptr: hex(field(l, "ptr")),
        })
        .collect()
}

/// Ops of `alloc` messages as (op, addr, size, kind, dev, stream).
fn ops(msgs: &[Value], snapshot: bool) -> Vec<(String, u64, u64, String, u64, Option<u64>)> {
    msgs.iter()
        .filter(|m| msg_type(m) == "alloc" && m["snapshot"].as_bool().unwrap_or(false) == snapshot)
        .flat_map(|m| {
            let dev = m["dev"].as_u64().unwrap_or(999);
            m["ops"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |o| {
                    (
                        o[1].as_str().unwrap_or("").to_string(),
                        o[2].as_u64().unwrap_or(0),
                        o[3].as_u64().unwrap_or(0),
                        o[4].as_str().unwrap_or("").to_string(),
                        dev,
                        o[5].as_u64(),
                    )
                })
        })
        .collect()
}

#[test]
fn every_path_is_seen_and_passed_through_unchanged() {
    let (dir, exe) = setup();
    let lib = preload_lib();
    let sockdir = dir.path().join("sock");
    let sockdir_s = sockdir.to_str().expect("utf8");
    let lib_s = lib.to_str().expect("utf8");

    let plain = run_plain(&exe, &[]);
    assert!(plain.contains("fork child exit=0"), "{plain}");
    assert!(plain.contains("rtld_next_is_first_definition=1"), "{plain}");
    let want = expected(&plain);
    assert_eq!(want.len(), 12, "{plain}");

    // Pass-through: identical output (results, pointers, and the stand-in's
    // checksum over every argument it received) with the interposer loaded.
    let disabled = run_plain(
        &exe,
        &[
            ("LD_PRELOAD", lib_s),
            ("GPUMON_DIR", sockdir_s),
            ("GPUMON_PRELOAD_DISABLE", "1"),
        ],
    );
    assert_eq!(disabled, plain);

    let mut child = Command::new(&exe)
        .env("LD_PRELOAD", lib_s)
        .env("GPUMON_DIR", sockdir_s)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = String::new();
    loop {
        let mut l = String::new();
        if stdout.read_line(&mut l).expect("read") == 0 {
            panic!("program ended before ready: {seen}");
        }
        seen.push_str(&l);
        if l == "ready\n" {
            break;
        }
    }
    let sock = wait_for_socket(&sockdir, child.id());
    let mut mon = Monitor::connect(&sock);
    // Up to the first sample of device 0, which follows the snapshot.
    let first = mon.read_until(Duration::from_secs(10), |m| {
        msg_type(m) == "sample" && m["dev"] == 0
    });
    let hello = &first[0];
    assert_eq!(msg_type(hello), "hello");
    assert_eq!(hello["role"], "interposer");
    assert_eq!(hello["framework"], "cuda-driver");
    assert_eq!(hello["allocator"], "driver");
    assert_eq!(hello["pid"], child.id());
    assert_eq!(hello["framework_version"], "13.0");
    let devs = hello["devices"].as_array().cloned().unwrap_or_default();
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[1]["name"], "Stand-in GPU");
    assert_eq!(devs[1]["pci_bus_id"], "0000:3c:00.0");
    assert_eq!(devs[0]["uuid"], "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
    assert_eq!(devs[0]["total"], 80u64 << 30);
    assert_eq!(msg_type(&first[1]), "history");
    assert_eq!(first[1]["done"], true);

    // Every device allocation, on whatever path, is in the live snapshot.
    let snap = ops(&first, true);
    let device: Vec<&Alloc> = want
        .iter()
        .filter(|a| !a.kind.starts_with("host"))
        .collect();
    assert_eq!(snap.len(), device.len(), "{snap:?}");
    for a in &device {
        assert!(
            snap.iter().any(|o| o.0 == "+"
                && o.1 == a.ptr
                && o.2 == a.size
                && o.3 == a.kind
                && o.4 == a.dev),
            "{a:?} missing from {snap:?}"
        );
    }
    // Streams travel with stream-ordered allocations.
    assert!(snap.iter().any(|o| o.3 == "async" && o.5 == Some(0x5a)));
    assert!(snap.iter().any(|o| o.3 == "pool" && o.5 == Some(0x5b)));

    let sample = first.last().expect("sample");
    let live0: u64 = device.iter().filter(|a| a.dev == 0).map(|a| a.size).sum();
    let pooled0: u64 = device
        .iter()
        .filter(|a| a.dev == 0 && (a.kind == "async" || a.kind == "pool"))
        .map(|a| a.size)
        .sum();
    assert_eq!(sample["allocated"], live0);
    assert_eq!(sample["peak_allocated"], live0);
    // Device pool 64 MiB + explicit pool 32 MiB, as the stand-in reports them.
    assert_eq!(sample["pool_reserved"], 96 * MIB);
    assert_eq!(sample["reserved"], live0 - pooled0 + 96 * MIB);
    assert_eq!(sample["host_pinned"], 12 * MIB);
    assert_eq!(sample["largest_alloc"], 17 * MIB);

    // Now free everything and read to the final `bye`.
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("stdin");
    let rest = mon.read_until(Duration::from_secs(10), |m| msg_type(m) == "bye");
    assert_eq!(rest.last().map(msg_type), Some("bye"));
    let frees = ops(&rest, false);
    for a in &device {
        assert!(
            frees
                .iter()
                .any(|o| o.0 == "-" && o.1 == a.ptr && o.2 == a.size && o.4 == a.dev),
            "free of {a:?} missing from {frees:?}"
        );
    }
    assert!(frees.iter().all(|o| o.0 == "-"), "{frees:?}");
    // The last batch per device shows nothing live and the exact peak.
    let mut last: HashMap<u64, &Value> = HashMap::new();
    for m in rest.iter().filter(|m| msg_type(m) == "alloc") {
        last.insert(m["dev"].as_u64().unwrap_or(999), m);
    }
    assert_eq!(last[&0]["live_bytes"], 0);
    assert_eq!(last[&0]["peak_bytes"], live0);
    assert_eq!(last[&1]["live_bytes"], 0);
    assert_eq!(last[&1]["peak_bytes"], 39 * MIB);
    assert_eq!(last[&0]["hist"], serde_json::json!([]));

    std::io::Read::read_to_string(&mut stdout, &mut seen).expect("stdout");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    // gpumon's own decoder accepts every message as a known type.
    for m in first.iter().chain(&rest) {
        let decoded = gpumon::wire::decode_line(m.to_string().as_bytes());
        assert!(
            matches!(decoded, Ok(gpumon::wire::Decoded::Msg(_))),
            "{decoded:?}: {m}"
        );
    }
    assert_eq!(seen, plain, "output changed under the interposer");
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The socket is removed at exit (the forked child's too).
    let left: Vec<_> = std::fs::read_dir(&sockdir).expect("dir").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn unusable_socket_dir_means_pass_through_and_one_line() {
    let (dir, exe) = setup();
    let lib = preload_lib();
    let plain = run_plain(&exe, &[]);
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let out = Command::new(&exe)
        .env("LD_PRELOAD", &lib)
        .env("GPUMON_DIR", &open)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            if let Some(mut i) = c.stdin.take() {
                i.write_all(b"go\n")?;
            }
            c.wait_with_output()
        })
        .expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), plain);
    let err = String::from_utf8_lossy(&out.stderr);
    // One line per process: the program, and the child it forks (whose own
    // reporter may start before the parent's has given up).
    let lines: Vec<&str> = err.lines().collect();
    assert!((1..=2).contains(&lines.len()), "{err}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("gpumon-preload: socket directory refused")),
        "{err}"
    );
}
