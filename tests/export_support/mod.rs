//! Frames for the export tests and the scrape benchmark, built in code so the
//! expected values are visible next to the assertions that use them.
#![allow(dead_code)]

use gpumon::model::frame::CompanionFrame;
use gpumon::model::frame::{Frame, Header};
use gpumon::model::sample::{GpuInfo, GpuSample, MemInfo, ProcInfo, ProcKind, ProcSample, Tick};
use gpumon::model::state::State;
use gpumon::wire::{DeviceInfo, EpochRecord, Frag, Hello, Message, Sample};

pub const GIB: u64 = 1 << 30;
pub const T0: i64 = 1_700_000_000_000;

pub fn gpu_info(index: u32) -> GpuInfo {
    GpuInfo {
        index,
        name: "NVIDIA H200".into(),
        uuid: format!("GPU-{index:08x}-aaaa-bbbb-cccc-dddddddddddd"),
        pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + index),
        memory_total: 141 * GIB,
        mig_uuids: vec![],
    }
}

pub fn header(host: &str, gpus: u32) -> Frame {
    Frame::Header(Header {
        v: 1,
        format: "gpumon".into(),
        host: host.into(),
        driver_version: Some("550.54.15".into()),
        nvml_version: None,
        cuda_version: Some("12.4".into()),
        started: T0,
        interval_ms: 1000,
        gpus: (0..gpus).map(gpu_info).collect(),
        gpumon_version: "0.1.0".into(),
    })
}

pub fn mem(used: u64) -> MemInfo {
    MemInfo {
        total: 141 * GIB,
        used,
        free: 141 * GIB - used - GIB / 2,
        reserved: GIB / 2,
    }
}

pub fn gpu(index: u32, used: u64, procs: &[(u32, Option<u64>)]) -> GpuSample {
    GpuSample {
        index,
        mem: Some(mem(used)),
        util: Some(87),
        temp_c: Some(61),
        power_mw: Some(612_345),
        procs: procs
            .iter()
            .map(|&(pid, used)| ProcSample {
                pid,
                kind: ProcKind::Compute,
                used,
                ..ProcSample::default()
            })
            .collect(),
        error: None,
    }
}

pub fn failed(index: u32) -> GpuSample {
    GpuSample {
        index,
        mem: None,
        util: None,
        temp_c: None,
        power_mw: None,
        procs: vec![],
        error: Some("GPU is lost".into()),
    }
}

pub fn tick(t: i64, gpus: Vec<GpuSample>) -> Frame {
    Frame::Tick(Tick { t, gpus })
}

/// Two GPUs: GPU 0 runs a trainer (with a companion) whose name needs escaping
/// and a process whose memory NVML cannot report; GPU 1 fails on the last tick.
pub fn two_gpu_frames() -> Vec<Frame> {
    vec![
        header("node-a", 2),
        tick(
            T0 + 1_000,
            vec![
                gpu(0, 40 * GIB, &[(4242, Some(30 * GIB)), (77, None)]),
                gpu(1, 10 * GIB, &[(5151, Some(9 * GIB))]),
            ],
        ),
        Frame::Procs {
            t: T0 + 1_000,
            procs: vec![
                ProcInfo {
                    pid: 4242,
                    user: Some("alice".into()),
                    name: Some("train \"big\" \\ model\nv2".into()),
                    ..ProcInfo::default()
                },
                ProcInfo {
                    pid: 5151,
                    user: Some("bob".into()),
                    name: Some("python3".into()),
                    // Every Python job's `comm` is python3: the label is its script.
                    cmdline: Some("/usr/bin/python3 -u /home/bob/eval_bob.py --split test".into()),
                    ..ProcInfo::default()
                },
            ],
        },
        tick(
            T0 + 2_000,
            vec![
                gpu(0, 50 * GIB, &[(4242, Some(35 * GIB)), (77, None)]),
                gpu(1, 12 * GIB, &[(5151, Some(11 * GIB))]),
            ],
        ),
        companion(
            T0 + 2_100,
            Message::Hello(Hello {
                role: "companion".into(),
                pid: Some(4242),
                framework: Some("torch".into()),
                devices: vec![DeviceInfo {
                    dev: 0,
                    uuid: Some(gpu_info(0).uuid),
                    ..DeviceInfo::default()
                }],
                ..Hello::default()
            }),
        ),
        companion(
            T0 + 2_200,
            Message::Epoch(EpochRecord {
                epoch: 2,
                dev: 0,
                floor: Some(20 * GIB),
                peak: Some(31 * GIB),
                ..EpochRecord::default()
            }),
        ),
        companion(
            T0 + 2_300,
            Message::Sample(Sample {
                dev: 0,
                allocated: Some(30 * GIB),
                reserved: Some(34 * GIB),
                peak_allocated: Some(33 * GIB),
                peak_reserved: Some(36 * GIB),
                limit: Some(140 * GIB),
                epoch: Some(3),
                num_ooms: Some(1),
                num_alloc_retries: Some(4),
                ..Sample::default()
            }),
        ),
        companion(
            T0 + 2_400,
            Message::Frag(Frag {
                dev: 0,
                free_total: Some(4 * GIB),
                largest_free: Some(GIB),
                n_free_blocks: Some(5),
                hist: Some(vec![(30, 2, 2 * GIB), (20, 3, 3 << 20)]),
                ..Frag::default()
            }),
        ),
        tick(
            T0 + 3_000,
            vec![
                gpu(0, 45 * GIB, &[(4242, Some(32 * GIB)), (77, None)]),
                failed(1),
            ],
        ),
    ]
}

pub fn companion(t: i64, msg: Message) -> Frame {
    Frame::Companion(CompanionFrame { t, pid: 4242, msg })
}

/// `gpus` GPUs with `per_gpu` processes each over `ticks` ticks (the benchmark load).
pub fn synthetic_frames(gpus: u32, per_gpu: u32, ticks: i64) -> Vec<Frame> {
    let mut frames = vec![header("bench-node", gpus)];
    let mut infos = Vec::new();
    for t in 1..=ticks {
        let samples = (0..gpus)
            .map(|g| {
                let procs: Vec<(u32, Option<u64>)> = (0..per_gpu)
                    .map(|p| {
                        let pid = 10_000 + g * 1_000 + p;
                        (
                            pid,
                            Some((u64::from(p) + 1) * 256 * (1 << 20) + t as u64 * 4096),
                        )
                    })
                    .collect();
                gpu(g, 100 * GIB + t as u64 * 1024, &procs)
            })
            .collect();
        frames.push(tick(T0 + t * 1_000, samples));
        if t == 1 {
            for g in 0..gpus {
                for p in 0..per_gpu {
                    let pid = 10_000 + g * 1_000 + p;
                    infos.push(ProcInfo {
                        pid,
                        user: Some(format!("user{}", p % 7)),
                        name: Some(format!("python3 worker-{p}")),
                        ..ProcInfo::default()
                    });
                }
            }
            frames.push(Frame::Procs {
                t: T0 + 1_000,
                procs: std::mem::take(&mut infos),
            });
        }
    }
    frames
}

pub fn state_of(frames: &[Frame]) -> State {
    let mut s = State::default();
    for f in frames {
        s.apply(f);
    }
    s
}
