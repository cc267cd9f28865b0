//! gpumon's memory has a ceiling under any companion input:
//! the attacks of the reliability review fed to the model, live and replayed.

use gpumon::model::allocator::{Companions, MAX_COMPANIONS, MAX_EPOCHS, MAX_MARKERS};
use gpumon::model::caps;
use gpumon::model::frame::CompanionFrame;
use gpumon::wire::{EpochRecord, Frag, Hello, Marker, Message, Sample};

use crate::support::isolate::alone;

fn frame(t: i64, pid: u32, msg: Message) -> CompanionFrame {
    CompanionFrame { t, pid, msg }
}

fn hello() -> Message {
    Message::Hello(Hello {
        role: "companion".into(),
        framework: Some("torch".into()),
        started: Some(1),
        ..Hello::default()
    })
}

fn sample(t: i64, dev: u32) -> Message {
    Message::Sample(Sample {
        t: Some(t),
        dev,
        allocated: Some(1 << 30),
        reserved: Some(2 << 30),
        ..Sample::default()
    })
}

fn epoch(t: i64, dev: u32, n: u64) -> Message {
    Message::Epoch(EpochRecord {
        t: Some(t),
        epoch: n,
        dev,
        floor: Some(1),
        peak: Some(2),
        ..EpochRecord::default()
    })
}

fn rss_bytes() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").expect("test setup");
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .expect("test setup")
        .parse()
        .expect("test setup");
    pages * 4096
}

/// `dev_bomb` and `epoch_dev_bomb`: a new device number in every message.
#[test]
fn a_new_device_in_every_message_is_capped() {
    let mut c = Companions::default();
    c.apply(&frame(0, 7, hello()));
    for i in 0..50_000u32 {
        let t = 1_000 + i64::from(i);
        c.apply(&frame(t, 7, sample(t, i)));
        c.apply(&frame(t, 7, epoch(t, i, u64::from(i))));
    }
    let p = c.get(7).expect("test setup");
    assert_eq!(p.devices.len(), caps::MAX_DEVICES_PER_COMPANION);
    assert!(p.devices.keys().all(|&d| d <= caps::MAX_DEV_NUMBER));
    assert!(p.refused >= 2 * (50_000 - 16));
    let epochs: usize = p.devices.values().map(|d| d.epochs.len()).sum();
    assert!(epochs <= MAX_EPOCHS, "{epochs} epochs kept");
}

/// A companion with the worst content the caps allow, everywhere: its counted
/// footprint is the documented per-companion ceiling, and the heap it really
/// takes stays under that count.
#[test]
fn one_companion_at_every_cap_stays_under_its_counted_ceiling() {
    // It reads this process's RSS: alone in a process, so no other test's memory counts.
    if !alone(
        module_path!(),
        "one_companion_at_every_cap_stays_under_its_counted_ceiling",
    ) {
        return;
    }
    let rss0 = rss_bytes();
    let mut c = Companions::default();
    c.apply(&frame(0, 9, hello()));
    let long = "x".repeat(caps::MAX_ITEM_STRING_BYTES - 8);
    // Timestamps 5 minutes apart fill every tier of every series (the fastest a
    // hostile clock can grow them), on every allowed device.
    let mut t = 0i64;
    for i in 0..12_000u32 {
        t += 300_000;
        let dev = i % caps::MAX_DEVICES_PER_COMPANION as u32;
        c.apply(&frame(t, 9, sample(t, dev)));
        c.apply(&frame(t, 9, epoch(t, dev, u64::from(i))));
        c.apply(&frame(
            t,
            9,
            Message::Marker(Marker {
                t: Some(t),
                kind: "mark".into(),
                label: Some(format!("{long}{i}")),
                ..Marker::default()
            }),
        ));
        c.apply(&frame(
            t,
            9,
            Message::Frag(Frag {
                t: Some(t),
                dev,
                free_total: Some(10),
                largest_free: Some(5),
                hist: Some((0..2000).map(|k| (k % 70, 1, 1)).collect()),
                ..Frag::default()
            }),
        ));
    }
    let p = c.get(9).expect("test setup");
    assert_eq!(p.markers.len(), MAX_MARKERS);
    let hist_len = p.devices[&0]
        .frag
        .as_ref()
        .expect("test setup")
        .hist
        .as_ref()
        .expect("test setup")
        .len();
    assert_eq!(
        hist_len, 64,
        "duplicates merged, impossible buckets dropped"
    );
    let ceiling = caps::companion_worst_bytes(16, MAX_EPOCHS, 1_000, MAX_MARKERS);
    assert!(c.worst_bytes() <= ceiling);
    let grown = rss_bytes().saturating_sub(rss0);
    assert!(
        grown <= ceiling,
        "heap grew {grown} bytes, over the counted ceiling {ceiling}"
    );
}

/// Many companions together never hold more than the global ceiling: the
/// largest footprint is dropped first.
#[test]
fn all_companions_together_stay_under_the_global_ceiling() {
    let mut c = Companions::default();
    let mut max_seen = 0;
    for pid in 1..=(MAX_COMPANIONS as u32 + 40) {
        c.apply(&frame(0, pid, hello()));
        for dev in 0..caps::MAX_DEVICES_PER_COMPANION as u32 {
            c.apply(&frame(1, pid, sample(1, dev)));
        }
        max_seen = max_seen.max(c.worst_bytes());
    }
    assert!(max_seen <= caps::MAX_TOTAL_BYTES, "{max_seen}");
    assert!(c.by_pid.len() <= MAX_COMPANIONS);
    assert!(c.evicted > 0, "the ceiling was reached and enforced");
}

/// Everything a companion held goes with it.
#[test]
fn a_disconnect_frees_the_companion() {
    let mut c = Companions::default();
    c.apply(&frame(0, 5, hello()));
    for dev in 0..16 {
        c.apply(&frame(1, 5, sample(1, dev)));
    }
    assert!(c.worst_bytes() > 0);
    c.apply(&frame(
        2,
        5,
        Message::Disconnected(gpumon::wire::Disconnected::default()),
    ));
    assert!(c.get(5).is_none());
    assert_eq!(c.worst_bytes(), 0);
}

/// The same attack from a recording: `replay` of 20,000 device numbers under
/// one pid (653 MB RSS before the caps).
#[test]
fn a_hostile_recording_replays_within_the_ceiling() {
    // It reads the peak RSS of this process's children: alone, so the replay is the only one.
    if !alone(
        module_path!(),
        "a_hostile_recording_replays_within_the_ceiling",
    ) {
        return;
    }
    use std::io::Write;
    let dir = tempfile::tempdir().expect("test setup");
    let path = dir.path().join("devbomb.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("test setup"));
    writeln!(
        f,
        r#"{{"type":"header","v":1,"format":"gpumon","host":"h","started":1000,"interval_ms":250,"gpus":[]}}"#
    )
    .expect("test setup");
    for i in 0..20_000u32 {
        let t = 1_000 + i64::from(i);
        writeln!(
            f,
            r#"{{"type":"companion","t":{t},"pid":42,"msg":{{"type":"epoch","t":{t},"epoch":{i},"dev":{i},"floor":1,"peak":2}}}}"#
        )
        .expect("test setup");
        writeln!(
            f,
            r#"{{"type":"companion","t":{t},"pid":42,"msg":{{"type":"sample","t":{t},"dev":{i},"allocated":5,"reserved":9}}}}"#
        )
        .expect("test setup");
    }
    drop(f);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", path.to_str().expect("test setup"), "--headless"])
        .output()
        .expect("test setup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SAFETY: getrusage fills the struct we pass.
    let maxrss_kb = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru.ru_maxrss as usize
    };
    let ceiling = caps::companion_worst_bytes(16, MAX_EPOCHS, 1_000, MAX_MARKERS);
    assert!(
        maxrss_kb * 1024 < 64 * 1024 * 1024 + ceiling,
        "replay peak RSS {maxrss_kb} KiB"
    );
}
