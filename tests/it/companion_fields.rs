//! One run in which a companion sends every field it can, and the screens that show them.
//!
//! A new field of a companion message does not compile here until the fixture sends it (the
//! messages are written without `..Default::default()`), the fixture must send it with a
//! value (`the_fixture_sends_every_field_the_monitor_reads`), and the snapshots below then
//! show its screen line, so the screen a field reaches is read in review, not guessed.
//! The fixture is synthetic (the numbers of a torch job on an H200, and an interposer beside
//! it): no real recording carries every optional field at once.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::export::{GIB, T0, gpu, header, tick};
use crate::support::{theme, with_view};
use gpumon::model::frame::{CompanionFrame, Frame};
use gpumon::model::sample::ProcInfo;
use gpumon::pipeline::Pipeline;
use gpumon::tui::app::{App, SourceKind, View};
use gpumon::wire::{
    AllocBatch, DeviceInfo, EpochRecord, EventKind, Frag, Framework, FrameworkEvent, Hello, Marker,
    Message, Role, Sample,
};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

const MIB: u64 = 1 << 20;
/// The Python companion's process and the interposer-only process.
const TORCH: u32 = 4242;
const NATIVE: u32 = 4343;
const SECS: i64 = 40;

fn from(pid: u32, t: i64, msg: Message) -> Frame {
    Frame::Companion(CompanionFrame { t, pid, msg })
}

fn na(key: &str, why: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_string(), why.to_string())])
}

fn device() -> DeviceInfo {
    DeviceInfo {
        dev: 0,
        uuid: Some(crate::support::export::gpu_info(0).uuid),
        pci_bus_id: Some(crate::support::export::gpu_info(0).pci_bus_id),
        name: Some("NVIDIA H200".into()),
        total: Some(140 * GIB),
    }
}

fn hello(pid: u32, role: Role) -> Message {
    Message::Hello(Hello {
        role,
        pid: Some(pid),
        ns_pid: Some(pid + 1000),
        framework: Some(Framework::Torch),
        framework_version: Some("2.11.0+cu130".into()),
        allocator: Some("native".into()),
        settings: BTreeMap::from([(
            "PYTORCH_CUDA_ALLOC_CONF".to_string(),
            "expandable_segments:False".to_string(),
        )]),
        policy: Some("caching allocator, segments split".into()),
        devices: vec![device()],
        cuda_visible_devices: Some("0".into()),
        cuda_device_order: Some("PCI_BUS_ID".into()),
        rank: Some(0),
        local_rank: Some(0),
        world_size: Some(1),
        cmdline: Some("python3 -u train_every_field.py --lr 3e-4".into()),
        program: Some("train_every_field.py --lr 3e-4".into()),
        master: Some("127.0.0.1:29500".into()),
        run_id: Some("every-field-run".into()),
        capabilities: vec!["frag".into(), "epochs".into()],
        sample_hz: Some(4.0),
        snapshot_s: Some(5.0),
        started: Some(T0),
        na: na(
            "rank_source",
            "torch.distributed not initialised: RANK read",
        ),
    })
}

/// The interposer says less of itself: no framework, no policy.
fn interposer_hello() -> Message {
    let Message::Hello(h) = hello(NATIVE, Role::Interposer) else {
        unreachable!("a hello")
    };
    Message::Hello(Hello {
        framework: None,
        framework_version: None,
        allocator: Some("driver".into()),
        settings: BTreeMap::new(),
        policy: None,
        cmdline: Some("./solver --grid 4096".into()),
        capabilities: vec!["alloc".into()],
        na: BTreeMap::new(),
        // a program of its own, not a rank of the torch process's job
        program: None,
        master: None,
        run_id: None,
        rank: None,
        local_rank: None,
        world_size: None,
        ..h
    })
}

fn sample(t: i64, i: u64) -> Message {
    Message::Sample(Sample {
        t: Some(t),
        dev: 0,
        allocated: Some(20 * GIB + i * 64 * MIB),
        reserved: Some(26 * GIB + i * 64 * MIB),
        active: Some(20 * GIB + i * 64 * MIB + 12 * MIB),
        requested: Some(20 * GIB + i * 64 * MIB - 3 * MIB),
        inactive_split: Some(700 * MIB),
        peak_allocated: Some(24 * GIB + i * 64 * MIB),
        peak_reserved: Some(28 * GIB + i * 64 * MIB),
        limit: Some(126 * GIB),
        largest_free: Some(1536 * MIB),
        largest_alloc: Some(4 * GIB),
        num_alloc_retries: Some(2),
        num_ooms: Some(0),
        epoch: Some(i / 10),
        cost_us: Some(35),
        dropped: Some(1),
        na: na(
            "active_bytes",
            "from memory_stats, not the caching allocator",
        ),
    })
}

fn frag(t: i64) -> Message {
    Message::Frag(Frag {
        t: Some(t),
        dev: 0,
        free_total: Some(6 * GIB),
        largest_free: Some(1536 * MIB),
        n_free_blocks: Some(37),
        n_segments: Some(64),
        largest_block: Some(4 * GIB),
        hist: Some(vec![
            (20, 20, 30 * MIB),
            (28, 12, 4 * GIB),
            (30, 1, 1536 * MIB),
        ]),
        free_top: vec![1536 * MIB, 1024 * MIB, 700 * MIB],
        live_top: vec![4 * GIB, 2 * GIB, GIB],
        allocated: Some(21 * GIB),
        reserved: Some(27 * GIB),
        requests: vec![(640 * MIB, 12), (2 * GIB, 3)],
        source: Some("snapshot".into()),
        cost_us: Some(900),
        na: na("live_top", "sizes of blocks in use, largest first"),
    })
}

fn epoch(t: i64, n: u64) -> Message {
    Message::Epoch(EpochRecord {
        t: Some(t),
        epoch: n,
        dev: 0,
        floor: Some(18 * GIB + n * 256 * MIB),
        peak: Some(24 * GIB + n * 256 * MIB),
        reserved: Some(26 * GIB + n * 256 * MIB),
        start_t: Some(t - 10_000),
        steps: Some(120),
        na: na("floor", "after gc.collect and empty_cache"),
    })
}

/// The run: one H200, the torch job with its companion and a native program under the
/// interposer, a sample a second, a block map every 10 s, epochs every 10 s.
pub(crate) fn every_field_frames() -> Vec<Frame> {
    let mut out = vec![
        header("node-a", 1),
        Frame::Procs {
            t: T0 + 1_000,
            procs: vec![
                ProcInfo {
                    pid: TORCH,
                    user: Some("alice".into()),
                    name: Some("python3".into()),
                    cmdline: Some("python3 -u train_every_field.py --lr 3e-4".into()),
                    ..ProcInfo::default()
                },
                ProcInfo {
                    pid: NATIVE,
                    user: Some("bob".into()),
                    name: Some("solver".into()),
                    cmdline: Some("./solver --grid 4096".into()),
                    ..ProcInfo::default()
                },
            ],
        },
        from(TORCH, T0 + 1_100, hello(TORCH, Role::Companion)),
        from(NATIVE, T0 + 1_200, interposer_hello()),
    ];
    for s in 1..=SECS {
        let t = T0 + s * 1_000;
        let i = s as u64;
        let torch = 27 * GIB + i * 64 * MIB;
        out.push(tick(
            t,
            vec![gpu(
                0,
                torch + 9 * GIB,
                &[(TORCH, Some(torch)), (NATIVE, Some(8 * GIB))],
            )],
        ));
        out.push(from(TORCH, t + 100, sample(t + 100, i)));
        out.push(from(
            NATIVE,
            t + 150,
            Message::Alloc(AllocBatch {
                t: Some(t + 150),
                dev: 0,
                ops: vec![serde_json::json!(["+", 140_000_000_000u64, 256 * MIB])],
                live_bytes: Some(7 * GIB),
                peak_bytes: Some(7 * GIB + 512 * MIB),
                pool_reserved: Some(GIB),
                hist: Some(vec![(28, 28, 7 * GIB)]),
            }),
        ));
        if s % 10 == 0 {
            out.push(from(TORCH, t + 200, epoch(t + 200, i / 10)));
            out.push(from(TORCH, t + 300, frag(t + 300)));
        }
    }
    out.push(from(
        TORCH,
        T0 + 25_500,
        Message::Marker(Marker {
            t: Some(T0 + 25_500),
            kind: "eval".into(),
            label: Some("validation".into()),
            epoch: Some(2),
            step: Some(250),
        }),
    ));
    out.push(from(
        TORCH,
        T0 + 33_500,
        Message::Event(FrameworkEvent {
            t: Some(T0 + 33_500),
            kind: EventKind::AllocRetry,
            dev: Some(0),
            requested: Some(2 * GIB),
            limit: Some(126 * GIB),
            device_free: Some(90 * GIB),
            free_total: Some(6 * GIB),
            largest_free: Some(1536 * MIB),
            detail: Some("freed the cache and retried".into()),
        }),
    ));
    out.sort_by_key(Frame::time);
    out
}

/// The fields serde reads for `T` (the names as they are on the wire).
fn wire_fields<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    struct Ask(Option<&'static [&'static str]>);
    impl<'de> serde::Deserializer<'de> for &mut Ask {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("only the field list is asked for"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(serde::de::Error::custom("only the field list is asked for"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut ask = Ask(None);
    let _ = T::deserialize(&mut ask);
    ask.0.expect("a struct with named fields")
}

fn keys<T: serde::Serialize>(v: &T) -> Vec<String> {
    match serde_json::to_value(v).expect("serialises") {
        serde_json::Value::Object(m) => m.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

/// Every field the monitor reads of every message that carries a process's data is sent
/// with a value somewhere in the run (a field left `None` or empty is not sent at all, and
/// its screen line would stay unseen). `history` only repeats these messages; `bye` and
/// `error` carry nothing a screen shows.
#[test]
fn the_fixture_sends_every_field_the_monitor_reads() {
    let mut sent: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for f in every_field_frames() {
        let Frame::Companion(c) = f else { continue };
        let (kind, k) = match &c.msg {
            Message::Hello(m) => ("hello", keys(m)),
            Message::Sample(m) => ("sample", keys(m)),
            Message::Frag(m) => ("frag", keys(m)),
            Message::Epoch(m) => ("epoch", keys(m)),
            Message::Marker(m) => ("marker", keys(m)),
            Message::Event(m) => ("event", keys(m)),
            Message::Alloc(m) => ("alloc", keys(m)),
            _ => continue,
        };
        sent.entry(kind).or_default().extend(k);
    }
    let expected: [(&str, &[&str]); 8] = [
        ("hello", wire_fields::<Hello>()),
        ("device", wire_fields::<DeviceInfo>()),
        ("sample", wire_fields::<Sample>()),
        ("frag", wire_fields::<Frag>()),
        ("epoch", wire_fields::<EpochRecord>()),
        ("marker", wire_fields::<Marker>()),
        ("event", wire_fields::<FrameworkEvent>()),
        ("alloc", wire_fields::<AllocBatch>()),
    ];
    sent.insert("device", keys(&device()).into_iter().collect());
    for (kind, fields) in expected {
        let got = sent.get(kind).cloned().unwrap_or_default();
        let missing: Vec<&&str> = fields.iter().filter(|f| !got.contains(**f)).collect();
        assert!(
            missing.is_empty(),
            "the every-field fixture sends no {missing:?} in a `{kind}`: give it a value in \
             tests/it/companion_fields.rs, then read the screens it changes"
        );
    }
}

fn app() -> App {
    let mut app = App::new(
        SourceKind::Replay {
            file: "every_field.gpumon.jsonl".into(),
            demo: false,
        },
        Pipeline::default(),
    );
    for f in &every_field_frames() {
        app.apply(f);
    }
    app
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    let (clashes, _) = gpumon::tui::ui::draw_checked(&mut buf, app, &theme(false));
    assert!(clashes.is_empty(), "pieces overlap at {w}x{h}: {clashes:?}");
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(buf[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

/// The screens a companion's fields reach: the overview's process lines and the detail
/// view's allocator panel of each process, at the sizes that show the most.
#[test]
fn every_field_on_the_screens() {
    for (pid, name) in [(TORCH, "torch"), (NATIVE, "interposer")] {
        for view in [View::Overview, View::Detail] {
            let mut a = with_view(app(), view);
            a.sel_pid = Some(pid);
            a.sel_chosen = true;
            a.sync();
            assert_eq!(a.sel_pid, Some(pid));
            for (w, h) in [(120, 40), (200, 60)] {
                let snap = format!("every_field_{name}_{view:?}_{w}x{h}").to_lowercase();
                insta::assert_snapshot!(snap, screen(&a, w, h));
            }
        }
    }
}
