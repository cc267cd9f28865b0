//! Alert lifecycle: raise, persist, acknowledge, worsen, clear, history, serialisation,
//! and evaluation from `State` built out of frames (the replay path).

use crate::support::alerts::*;
use crate::support::bare_header;
use gpumon::model::alerts::config::EngineConfig;
use gpumon::model::alerts::{
    AlertChange, AlertConfig, AlertEngine, AlertKey, AlertKind, ChangeKind, Severity,
};
use gpumon::model::frame::CompanionFrame;
use gpumon::model::frame::Frame;
use gpumon::model::sample::{GpuInfo, GpuSample, MemInfo, ProcKind, ProcSample, Tick};
use gpumon::model::state::State;
use gpumon::wire::{DeviceInfo, EpochRecord, Frag, FrameworkEvent, Hello, Message, Sample};

fn kinds(ch: &[AlertChange]) -> Vec<(ChangeKind, AlertKind)> {
    ch.iter().map(|c| (c.change, c.alert.kind)).collect()
}

fn key(kind: AlertKind, pid: u32) -> AlertKey {
    AlertKey {
        kind,
        pid: Some(pid),
        gpu: 0,
    }
}

#[test]
fn leak_is_raised_once_then_worsens_when_forecast_halves_and_ack_silences_until_then() {
    let mut e = AlertEngine::new(AlertConfig::default());
    // 1 GiB per epoch from 20 GiB; ceiling = reserved + free.
    let floor = |ep: u64| 20 * G + ep * G;
    let free = |n: u64| (100 * G).saturating_sub(n * G);
    let mut raised_at = None;
    let mut worsened = Vec::new();
    for n in 6..110u64 {
        let now = n as i64 * EPOCH_MS;
        let snap = snapshot(
            now,
            free(n),
            vec![proc_view(1, 30 * G, Some(companion(epochs(n, floor))))],
        );
        for c in e.evaluate_snapshot(&snap) {
            match c.change {
                ChangeKind::Raised => {
                    assert!(raised_at.is_none(), "raised twice");
                    raised_at = Some(n);
                    assert!(e.ack(&key(AlertKind::Growth, 1)));
                    assert!(e.visible().is_empty(), "acknowledged alert is silent");
                }
                ChangeKind::Worsened => worsened.push((n, c.alert.silenced, c.alert.severity)),
                other => panic!("unexpected {other:?} at {n}"),
            }
        }
    }
    // An exact floor is judged from epoch 0: five points plus one confirming
    // ending need epochs 0..5, which are complete in the snapshot with n = 6 epochs.
    assert_eq!(raised_at, Some(6));
    assert!(!worsened.is_empty());
    let (n, silenced, _) = worsened[0];
    assert!(!silenced, "a worse alert speaks again (epoch {n})");
    assert!(worsened.iter().any(|w| w.2 == Severity::Critical));
    let a = e.get(&key(AlertKind::Growth, 1)).expect("still active");
    assert_eq!(a.raised_epoch, Some(6));
}

#[test]
fn fragmentation_risk_must_persist_and_clears_into_history() {
    let cfg = AlertConfig::default();
    let persist = cfg.fragmentation.persist_ms;
    let mut e = AlertEngine::new(cfg);
    let t0 = 1_000_000;
    let snap = |t| snapshot(t, 32 * M, vec![proc_view(2, 12 * G, Some(fragmented(t)))]);
    assert!(
        e.evaluate_snapshot(&snap(t0)).is_empty(),
        "not yet persistent"
    );
    assert!(e.evaluate_snapshot(&snap(t0 + persist / 2)).is_empty());
    let ch = e.evaluate_snapshot(&snap(t0 + persist));
    assert_eq!(
        kinds(&ch),
        vec![(ChangeKind::Raised, AlertKind::FragmentationRisk)]
    );
    assert!(ch[0].wants_bell());
    assert!(ch[0].alert.message.contains("expandable_segments:True"));
    // A hole large enough appears: cleared, kept in history.
    let mut ok = fragmented(t0);
    ok.frag = ok.frag.map(|mut f| {
        f.largest_free = Some(128 * M);
        f
    });
    let ch = e.evaluate_snapshot(&snapshot(
        t0 + persist + 1,
        32 * M,
        vec![proc_view(2, 12 * G, Some(ok))],
    ));
    assert_eq!(
        kinds(&ch),
        vec![(ChangeKind::Cleared, AlertKind::FragmentationRisk)]
    );
    assert_eq!(e.history().count(), 1);
    assert!(e.active().is_empty());
}

#[test]
fn interrupted_condition_restarts_its_persistence() {
    let cfg = AlertConfig::default();
    let persist = cfg.fragmentation.persist_ms;
    let mut e = AlertEngine::new(cfg);
    let bad = |t| snapshot(t, 32 * M, vec![proc_view(2, 12 * G, Some(fragmented(t)))]);
    let good = |t| snapshot(t, 10 * G, vec![proc_view(2, 12 * G, Some(fragmented(t)))]);
    e.evaluate_snapshot(&bad(0));
    e.evaluate_snapshot(&good(persist / 2));
    assert!(
        e.evaluate_snapshot(&bad(persist)).is_empty(),
        "the clock restarted"
    );
    assert!(!e.evaluate_snapshot(&bad(2 * persist)).is_empty());
}

#[test]
fn oom_events_raise_once_each_and_clear_after_the_hold() {
    let cfg = AlertConfig::default();
    let hold = cfg.fragmentation.oom_hold_ms;
    let mut e = AlertEngine::new(cfg);
    let mut c = fragmented(0);
    c.frag = None;
    c.ooms = vec![oom(100, 64 * M, 9000 * M)];
    let snap = |t, c: &gpumon::model::alerts::inputs::CompanionView| {
        snapshot(t, 10 * G, vec![proc_view(3, 12 * G, Some(c.clone()))])
    };
    let ch = e.evaluate_snapshot(&snap(200, &c));
    assert_eq!(
        kinds(&ch),
        vec![(ChangeKind::Raised, AlertKind::FragmentationOom)]
    );
    assert_eq!(ch[0].alert.severity, Severity::Critical);
    assert!(
        e.evaluate_snapshot(&snap(300, &c)).is_empty(),
        "same event, no news"
    );
    e.ack_all();
    // A second OOM: worse (count 2) even though acknowledged.
    c.ooms.push(oom(400, 64 * M, 9000 * M));
    let ch = e.evaluate_snapshot(&snap(500, &c));
    assert_eq!(
        kinds(&ch),
        vec![(ChangeKind::Worsened, AlertKind::FragmentationOom)]
    );
    assert!(!ch[0].alert.silenced);
    assert_eq!(ch[0].alert.evidence.count, Some(2));
    let ch = e.evaluate_snapshot(&snap(400 + hold + 1, &c));
    assert_eq!(
        kinds(&ch),
        vec![(ChangeKind::Cleared, AlertKind::FragmentationOom)]
    );
}

#[test]
fn history_is_bounded() {
    let cfg = AlertConfig {
        engine: EngineConfig {
            history: 3,
            ..EngineConfig::default()
        },
        ..AlertConfig::default()
    };
    let hold = cfg.fragmentation.oom_hold_ms;
    let mut e = AlertEngine::new(cfg);
    for i in 0..10u32 {
        let t = i64::from(i) * (hold + 10);
        let mut c = fragmented(t);
        c.frag = None;
        c.ooms = vec![oom(t, 64 * M, M)];
        e.evaluate_snapshot(&snapshot(t, 10 * G, vec![proc_view(100 + i, G, Some(c))]));
    }
    e.evaluate_snapshot(&snapshot(100 * hold, 10 * G, vec![]));
    assert_eq!(e.history().count(), 3);
    assert_eq!(
        e.history().next().and_then(|a| a.pid),
        Some(109),
        "newest first"
    );
}

#[test]
fn alert_changes_round_trip_through_json() {
    let mut e = AlertEngine::new(AlertConfig::default());
    let snap = snapshot(
        12 * EPOCH_MS,
        50 * G,
        vec![proc_view(
            7,
            20 * G,
            Some(companion(epochs(12, |ep| 10 * G + ep * 100 * M))),
        )],
    );
    let ch = e.evaluate_snapshot(&snap);
    assert_eq!(ch.len(), 1);
    let line = serde_json::to_string(&ch[0]).expect("serialisable");
    assert!(line.contains(r#""change":"raised""#), "{line}");
    assert!(line.contains(r#""kind":"growth""#), "{line}");
    let back: AlertChange = serde_json::from_str(&line).expect("round trip");
    // Floats may differ in the last digit; the record must be stable after one trip.
    assert_eq!(serde_json::to_string(&back).expect("serialisable"), line);
    assert_eq!(back.alert.summary, ch[0].alert.summary);
    assert!(!line.contains("Infinity") && !line.contains("NaN"));
}

fn header() -> Frame {
    bare_header(
        0,
        vec![GpuInfo {
            index: 0,
            name: "H200".into(),
            uuid: "GPU-aaaa".into(),
            pci_bus_id: "0000:01:00.0".into(),
            memory_total: TOTAL,
            mig_uuids: vec![],
        }],
    )
}

fn tick(t: i64, pid: u32, used: u64) -> Frame {
    Frame::Tick(Tick {
        t,
        gpus: vec![GpuSample {
            index: 0,
            mem: Some(MemInfo {
                total: TOTAL,
                used,
                free: TOTAL - used,
                reserved: 0,
            }),
            util: None,
            temp_c: None,
            power_mw: None,
            procs: vec![ProcSample {
                pid,
                kind: ProcKind::Compute,
                used: Some(used),
                ..ProcSample::default()
            }],
            error: None,
        }],
    })
}

fn comp(t: i64, pid: u32, msg: Message) -> Frame {
    Frame::Companion(CompanionFrame { t, pid, msg })
}

#[test]
fn nvml_only_grab_all_is_info_after_persisting_from_state() {
    let mut st = State::default();
    let mut e = AlertEngine::new(AlertConfig::default());
    st.apply(&header());
    let mut raised = None;
    for s in 0..200 {
        let t = s * 1000;
        st.apply(&tick(t, 42, 130 * G));
        for c in e.evaluate(&st) {
            assert_eq!(c.alert.kind, AlertKind::GrabAll);
            raised.get_or_insert((t, c));
        }
    }
    let (t, c) = raised.expect("grab-all raised");
    assert_eq!(t, 120_000, "after two minutes held");
    assert_eq!(c.alert.severity, Severity::Info);
    assert!(c.alert.message.contains("cannot tell"));
    assert!(!c.wants_bell(), "info does not ring");
}

#[test]
fn companion_epochs_from_frames_raise_a_leak_with_epoch_and_forecast() {
    let mut st = State::default();
    let mut e = AlertEngine::new(AlertConfig::default());
    st.apply(&header());
    st.apply(&comp(
        0,
        9,
        Message::Hello(Hello {
            role: "companion".into(),
            pid: Some(9),
            framework: Some("torch".into()),
            allocator: Some("native".into()),
            devices: vec![DeviceInfo {
                dev: 0,
                uuid: Some("GPU-aaaa".into()),
                ..DeviceInfo::default()
            }],
            ..Hello::default()
        }),
    ));
    let mut first = None;
    for ep in 0..20u64 {
        let t = (ep as i64 + 1) * 60_000;
        let floor = 10 * G + ep * 200 * M;
        st.apply(&tick(t, 9, floor + 8 * G));
        st.apply(&comp(
            t,
            9,
            Message::Sample(Sample {
                t: Some(t),
                dev: 0,
                allocated: Some(floor),
                reserved: Some(floor + 6 * G),
                epoch: Some(ep + 1),
                ..Sample::default()
            }),
        ));
        st.apply(&comp(
            t,
            9,
            Message::Epoch(EpochRecord {
                t: Some(t),
                epoch: ep,
                dev: 0,
                floor: Some(floor),
                peak: Some(floor + 5 * G),
                reserved: Some(floor + 6 * G),
                ..EpochRecord::default()
            }),
        ));
        for c in e.evaluate(&st) {
            if c.change == ChangeKind::Raised && c.alert.kind == AlertKind::Growth {
                first.get_or_insert(c);
            }
        }
    }
    let c = first.expect("leak raised");
    assert_eq!(
        c.alert.raised_epoch,
        Some(6),
        "exact floors from epoch 0: epochs 0..5 complete, epoch 6 running"
    );
    let fc = c.alert.evidence.forecast.as_ref().expect("forecast");
    assert_eq!(
        fc.ceiling_source.as_str(),
        "card memory not held by other processes"
    );
    assert!(
        c.alert.message.contains("min at the current rate")
            || c.alert.message.contains("h at the current rate"),
        "{}",
        c.alert.message
    );
    assert_eq!(
        c.alert.evidence.series.as_ref().map(|s| s.as_str()),
        Some("floor")
    );
}

#[test]
fn fragmentation_oom_event_from_frames() {
    let mut st = State::default();
    let mut e = AlertEngine::new(AlertConfig::default());
    st.apply(&header());
    st.apply(&comp(
        0,
        5,
        Message::Hello(Hello {
            role: "companion".into(),
            framework: Some("tensorflow".into()),
            devices: vec![DeviceInfo {
                dev: 0,
                uuid: Some("GPU-aaaa".into()),
                ..DeviceInfo::default()
            }],
            ..Hello::default()
        }),
    ));
    st.apply(&tick(1000, 5, 100 * G));
    st.apply(&comp(
        1000,
        5,
        Message::Frag(Frag {
            dev: 0,
            free_total: Some(9 * G),
            largest_free: None,
            ..Frag::default()
        }),
    ));
    st.apply(&comp(
        2000,
        5,
        Message::Event(FrameworkEvent {
            t: Some(2000),
            kind: "oom".into(),
            dev: Some(0),
            requested: Some(64 * M),
            free_total: Some(9 * G),
            ..FrameworkEvent::default()
        }),
    ));
    let ch = e.evaluate(&st);
    let oom = ch
        .iter()
        .find(|c| c.alert.kind == AlertKind::FragmentationOom)
        .expect("fragmentation OOM");
    assert!(
        oom.alert
            .message
            .contains("TF_GPU_ALLOCATOR=cuda_malloc_async")
    );
}

#[test]
fn alerts_of_an_exited_process_end_and_move_to_history() {
    let mut e = AlertEngine::new(AlertConfig::default());
    let floor = |ep: u64| 20 * G + ep * G;
    let mut raised = false;
    for n in 6..12u64 {
        let snap = snapshot(
            n as i64 * EPOCH_MS,
            60 * G,
            vec![proc_view(1, 30 * G, Some(companion(epochs(n, floor))))],
        );
        raised |= e
            .evaluate_snapshot(&snap)
            .iter()
            .any(|c| c.change == ChangeKind::Raised);
    }
    assert!(raised && e.get(&key(AlertKind::Growth, 1)).is_some());
    // The process is gone: NVML stopped listing it and its companion left.
    let gone = gpumon::model::alerts::inputs::ProcView {
        exited: true,
        ..proc_view(1, 30 * G, Some(companion(epochs(12, floor))))
    };
    let changes = e.evaluate_snapshot(&snapshot(12 * EPOCH_MS, 90 * G, vec![gone]));
    let cleared: Vec<_> = changes
        .iter()
        .filter(|c| c.change == ChangeKind::Cleared)
        .collect();
    assert_eq!(cleared.len(), 1, "{changes:?}");
    assert!(
        cleared[0]
            .alert
            .message
            .ends_with("(ended: process exited)"),
        "{}",
        cleared[0].alert.message
    );
    assert!(e.active().is_empty());
    assert!(
        e.history()
            .any(|a| a.message.contains("ended: process exited"))
    );
    // A process that merely left the snapshot (expired) ends the same way.
    let mut e2 = AlertEngine::new(AlertConfig::default());
    for n in 6..12u64 {
        e2.evaluate_snapshot(&snapshot(
            n as i64 * EPOCH_MS,
            60 * G,
            vec![proc_view(1, 30 * G, Some(companion(epochs(n, floor))))],
        ));
    }
    let changes = e2.evaluate_snapshot(&snapshot(12 * EPOCH_MS, 90 * G, vec![]));
    assert!(
        changes.iter().any(|c| c.change == ChangeKind::Cleared
            && c.alert.message.contains("ended: process exited"))
    );
}
