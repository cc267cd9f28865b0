//! Reader quirks that hostile input found: streams read once,
//! headers judged by what they are.

use std::io::Write;
use std::process::{Command, Output, Stdio};

const HEADER: &str = r#"{"type":"header","v":1,"format":"gpumon","host":"h","started":1000,"interval_ms":100,"gpus":[{"index":0,"name":"G","uuid":"GPU-1","pci_bus_id":"0","memory_total":1000}]}"#;

fn ticks(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"type\":\"tick\",\"t\":{},\"gpus\":[{{\"index\":0,\"mem\":{{\"total\":1000,\"used\":{i},\"free\":1,\"reserved\":0}},\"procs\":[]}}]}}\n",
                1000 + 100 * i as i64
            )
        })
        .collect()
}

fn replay(file: &str, stdin: Option<&str>, csv: &std::path::Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless", "--csv"])
        .arg(csv)
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = c.stdin.take().expect("stdin");
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).expect("feed");
    }
    drop(input);
    c.wait_with_output().expect("wait")
}

fn rows(csv: &std::path::Path) -> usize {
    std::fs::read_to_string(csv).map_or(0, |s| s.lines().count().saturating_sub(1))
}

#[test]
fn stdin_dash_and_dev_stdin_are_read_as_streams() {
    let dir = tempfile::tempdir().expect("dir");
    let rec = format!("{HEADER}\n{}", ticks(5));
    for name in ["-", "/dev/stdin"] {
        let csv = dir.path().join("rows.csv");
        let o = replay(name, Some(&rec), &csv);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(rows(&csv), 5, "{name}");
    }
}

#[test]
fn a_fifo_with_one_writer_is_read_once() {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("f");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf8")).expect("cstr");
    // SAFETY: a valid path string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let rec = format!("{HEADER}\n{}", ticks(3));
    let f2 = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(&f2)
            .expect("open fifo");
        w.write_all(rec.as_bytes()).expect("write");
    });
    let csv = dir.path().join("rows.csv");
    let o = replay(fifo.to_str().expect("utf8"), None, &csv);
    writer.join().expect("writer");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(rows(&csv), 3);
}

fn replay_file(content: &[u8]) -> Output {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("r.jsonl");
    std::fs::write(&path, content).expect("write");
    replay(
        path.to_str().expect("utf8"),
        None,
        &dir.path().join("rows.csv"),
    )
}

#[test]
fn headers_are_judged_by_what_they_are() {
    // A header without its newline is a header, not an empty file.
    let o = replay_file(HEADER.as_bytes());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A UTF-8 byte order mark is accepted.
    let o = replay_file(format!("\u{feff}{HEADER}\n{}", ticks(1)).as_bytes());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A future version is "newer", even without the fields of v1.
    let o = replay_file(b"{\"type\":\"header\",\"v\":2}\n");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("v2 is newer"), "{e}");
    // v0 and a foreign format are refused.
    for bad in [
        HEADER.replace("\"v\":1", "\"v\":0"),
        HEADER.replace("\"format\":\"gpumon\"", "\"format\":\"notgpumon\""),
    ] {
        let o = replay_file(format!("{bad}\n").as_bytes());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && e.contains("not a gpumon recording header"),
            "{e}"
        );
    }
}

/// One tick listing 30,000 processes (60k once took 46 s and `q` was ignored;
/// the model dropped the excess one scan per process).
#[test]
fn a_tick_with_a_huge_process_count_is_linear() {
    let procs: Vec<String> = (1..=30_000)
        .map(|p| format!("{{\"pid\":{p},\"kind\":\"compute\",\"used\":{}}}", 1000 + p))
        .collect();
    let tick = format!(
        "{{\"type\":\"tick\",\"t\":1000,\"gpus\":[{{\"index\":0,\"mem\":{{\"total\":1000000000000,\"used\":1,\"free\":1,\"reserved\":0}},\"procs\":[{}]}}]}}\n",
        procs.join(",")
    );
    let t = std::time::Instant::now();
    let o = replay_file(format!("{HEADER}\n{tick}").as_bytes());
    let secs = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(secs < 20.0, "{secs:.1} s for one tick");
}

/// One tick listing 20,000 GPUs (once 44 s): at most `MAX_GPUS` are tracked.
#[test]
fn a_tick_with_a_huge_gpu_count_is_bounded() {
    let gpus: Vec<String> = (0..20_000)
        .map(|i| format!("{{\"index\":{i},\"mem\":{{\"total\":1000,\"used\":1,\"free\":1,\"reserved\":0}},\"procs\":[]}}"))
        .collect();
    let tick = format!(
        "{{\"type\":\"tick\",\"t\":1000,\"gpus\":[{}]}}\n",
        gpus.join(",")
    );
    let t = std::time::Instant::now();
    let o = replay_file(format!("{HEADER}\n{tick}").as_bytes());
    let secs = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(secs < 20.0, "{secs:.1} s for one tick");
}
