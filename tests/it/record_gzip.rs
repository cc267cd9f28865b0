//! Recordings that last the run: gzip by default, at least 5x smaller
//! than NDJSON on the bundled demos, readable by `replay --follow` while they grow, and
//! whole up to about the last second after the recorder is killed with SIGKILL.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use gpumon::model::frame::Frame;
use gpumon::record::{Format, Next, Reader, Recorder};

use crate::support::channel::{HELLO, private_dir};
use crate::support::jsonl::{header, now_ms, tick};

fn all_frames(path: &Path) -> (Reader, Vec<Frame>) {
    let mut r = Reader::open(path).expect("opens");
    let mut v = Vec::new();
    while let Next::Frame(f) = r.next().expect("reads") {
        v.push(f);
    }
    (r, v)
}

/// Each bundled demo, re-recorded through the recorder both ways, flushed twice per
/// recorded second (the most the writer flushes live: every 500 ms at the earliest), so
/// the price of readable-while-written is in the figure.
#[test]
fn the_bundled_demos_record_at_least_5x_smaller_compressed() {
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let dir = tempfile::tempdir().expect("dir");
    let mut demos = 0;
    let mut report = String::new();
    for e in std::fs::read_dir(&assets).expect("assets") {
        let src = e.expect("entry").path();
        let name = src
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".gpumon.jsonl.gz") {
            continue;
        }
        demos += 1;
        let (r, frames) = all_frames(&src);
        let mut sizes = Vec::new();
        let mut read_back = Vec::new();
        for format in [Format::Ndjson, Format::Gzip] {
            let out = dir.path().join(format!("{name}{}", format.extension()));
            let rec = Recorder::create(&out, &r.header, format).expect("create");
            let mut next_flush = r.header.started + 500;
            for f in &frames {
                if f.time() >= next_flush {
                    rec.flush();
                    next_flush = f.time() + 500;
                }
                rec.write(f);
            }
            assert_eq!(rec.finish(), None);
            sizes.push(std::fs::metadata(&out).expect("stat").len());
            let (back, again) = all_frames(&out);
            assert_eq!(back.compressed(), format == Format::Gzip);
            read_back.push(serde_json::to_string(&again).expect("json"));
        }
        assert_eq!(
            read_back[0], read_back[1],
            "{name}: the same frames both ways"
        );
        let ratio = sizes[0] as f64 / sizes[1] as f64;
        report += &format!("{name}: {} -> {} bytes, {ratio:.1}x\n", sizes[0], sizes[1]);
        assert!(ratio >= 5.0, "{name}: only {ratio:.1}x\n{report}");
    }
    assert_eq!(demos, 4, "{report}");
    eprintln!("{report}");
}

/// A writer appending gzip as the recorder does: sync-flushed pieces of an open member,
/// a member closed, and a new one begun, while `replay --follow` reads.
#[test]
fn follow_reads_a_compressed_recording_while_it_grows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("live.gpumon.jsonl.gz");
    let csv = dir.path().join("rows.csv");
    let t0 = now_ms();
    let file = std::fs::File::create(&rec).expect("create");
    let mut gz = GzEncoder::new(file, Compression::default());
    gz.write_all((header(t0) + &tick(t0, 111)).as_bytes())
        .expect("write");
    gz.flush().expect("sync flush");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--follow", "--headless", "--csv"])
        .arg(&csv)
        .arg(&rec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon starts");
    let rows_with = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let rows = std::fs::read_to_string(&csv).unwrap_or_default();
            if rows.contains(needle) || Instant::now() > deadline {
                return rows;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let rows = rows_with(",111,");
    assert!(rows.contains(",111,"), "first tick missing:\n{rows}");

    // A line in two flushes: the first half alone must not be taken for a frame.
    let late = tick(now_ms(), 222_000_000);
    let (a, b) = late.split_at(late.len() / 2);
    gz.write_all(a.as_bytes()).expect("write");
    gz.flush().expect("sync flush");
    std::thread::sleep(Duration::from_millis(400));
    gz.write_all(b.as_bytes()).expect("write");
    gz.flush().expect("sync flush");
    let rows = rows_with(",222000000,");
    assert!(rows.contains(",222000000,"), "tick in two flushes:\n{rows}");

    // The member closed, a new one started (as the recorder does every 16 MiB).
    let file = gz.finish().expect("close the member");
    let mut gz = GzEncoder::new(file, Compression::default());
    gz.write_all(tick(now_ms(), 333_000_000).as_bytes())
        .expect("write");
    gz.flush().expect("sync flush");
    let rows = rows_with(",333000000,");
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    assert!(
        rows.contains(",333000000,"),
        "tick in a second member:\n{rows}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A companion (this test process) sending a sample every 20 ms.
fn steady_companion(dir: &Path) {
    let l = UnixListener::bind(dir.join(format!("{}.sock", std::process::id()))).expect("bind");
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = l.accept() {
            std::thread::spawn(move || {
                if writeln!(s, "{HELLO}").is_err() {
                    return;
                }
                loop {
                    let line = format!(
                        r#"{{"v":1,"type":"sample","dev":0,"allocated":{},"reserved":1}}"#,
                        now_ms()
                    );
                    if writeln!(s, "{line}").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
    });
}

#[test]
fn a_recorder_killed_with_sigkill_leaves_all_but_its_last_second() {
    let sockets = private_dir();
    steady_companion(sockets.path());
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("killed.gpumon.jsonl.gz");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["record", "--interval", "100ms", "--socket-dir"])
        .arg(sockets.path())
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpumon record");
    // Until companion frames are on disk (the file is read while it grows), then on.
    let deadline = Instant::now() + Duration::from_secs(20);
    let companion_frames = |path: &Path| {
        Reader::open(path).ok().map_or(0, |mut r| {
            let mut n = 0;
            while let Ok(Next::Frame(f)) = r.next() {
                n += usize::from(matches!(f, Frame::Companion(_)));
            }
            n
        })
    };
    while companion_frames(&out) < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let killed_at = now_ms();
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );

    let (r, frames) = all_frames(&out);
    assert!(r.compressed());
    let last = frames
        .iter()
        .filter(|f| matches!(f, Frame::Companion(_)))
        .map(Frame::time)
        .max()
        .expect("companion frames recorded");
    let lost_ms = killed_at - last;
    eprintln!(
        "{} frames; the last recorded {lost_ms} ms before the kill",
        frames.len()
    );
    // The writer flushes every 500 ms to 1 s (56 ms lost when measured); the rest of the
    // margin is for a loaded machine's scheduling.
    assert!(
        lost_ms <= 2_000,
        "the last {lost_ms} ms before the kill were lost"
    );
    assert!(
        r.tail_note()
            .is_some_and(|n| n.contains("unclosed gzip tail"))
    );

    let replay = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless"])
        .arg(&out)
        .output()
        .expect("replay");
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert!(replay.status.success(), "{stderr}");
    assert!(stderr.contains("unclosed gzip tail"), "{stderr}");
}

/// A gzip recording of `n` ticks (100 ms apart, `used` = 1000 + i), closed.
fn gz_recording(path: &Path, n: i64) {
    let t0 = now_ms();
    let mut gz = GzEncoder::new(
        std::fs::File::create(path).expect("create"),
        Compression::default(),
    );
    gz.write_all(header(t0).as_bytes()).expect("write");
    for i in 0..n {
        gz.write_all(tick(t0 + i * 100, 1000 + i as u64).as_bytes())
            .expect("write");
    }
    gz.finish().expect("finish");
}

#[test]
fn a_corrupt_compressed_tail_stops_replay_loudly_after_everything_before_it() {
    let dir = tempfile::tempdir().expect("dir");
    let rec = dir.path().join("bad.gz");
    gz_recording(&rec, 300);
    // A second member whose deflate data is garbage after its header.
    let mut bytes = std::fs::read(&rec).expect("read");
    bytes.extend([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff]);
    std::fs::write(&rec, &bytes).expect("write");
    let csv = dir.path().join("rows.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless", "--csv"])
        .arg(&csv)
        .arg(&rec)
        .output()
        .expect("replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad.gz:302: compressed data corrupt at byte")
            && stderr.contains("invalid deflate data")
            && stderr.contains("(the 301 lines before it were read)"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let rows = std::fs::read_to_string(&csv).expect("the frames before it were played");
    assert!(rows.contains(",1000,") && rows.contains(",1299,"), "{rows}");
}

#[test]
fn a_compressed_recording_plays_from_stdin() {
    let dir = tempfile::tempdir().expect("dir");
    let rec = dir.path().join("r.gpumon.jsonl.gz");
    gz_recording(&rec, 50);
    let csv = dir.path().join("rows.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless", "--csv"])
        .arg(&csv)
        .arg("-")
        .stdin(std::fs::File::open(&rec).expect("open"))
        .output()
        .expect("replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(&csv).expect("csv");
    assert!(rows.contains(",1000,") && rows.contains(",1049,"), "{rows}");
}

#[test]
fn without_o_the_recording_is_named_for_its_host_and_time_and_compressed() {
    let dir = tempfile::tempdir().expect("dir");
    let sockets = private_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["record", "--duration", "300ms", "--socket-dir"])
        .arg(sockets.path())
        .current_dir(dir.path())
        .output()
        .expect("record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let name = &names[0];
    // HOST-YYYYmmdd-HHMMSS.gpumon.jsonl.gz
    let stem = name.strip_suffix(".gpumon.jsonl.gz").expect(name);
    let (_, when) = stem.split_at(stem.len() - 16);
    assert!(
        when.starts_with('-') && when[1..].chars().filter(char::is_ascii_digit).count() == 14,
        "{name}"
    );
    let (r, _) = all_frames(&dir.path().join(name));
    assert!(r.compressed());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(name.as_str()),
        "the name is said"
    );
}
