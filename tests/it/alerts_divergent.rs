//! The divergent-rank rule through the engine, on synthetic jobs: ranks with allocator
//! jitter, a constant extra on rank 0, uneven last batches and one-off steps never raise
//! it; one rank keeping 16–40 MiB more per epoch is named within a few epochs. Fixed-seed
//! noise, so the figures printed are reproducible.

use gpumon::model::alerts::inputs::{EpochPoint, ProcView, Snapshot};
use gpumon::model::alerts::{AlertConfig, AlertEngine, AlertKind, ChangeKind};

use crate::support::alerts::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One rank: `extra` above the job's base, `leak` more per epoch from `leak_from`,
/// jitter of up to `jitter` bytes, and every epoch a peak `last_batch` lower (a smaller
/// last batch on this rank).
#[derive(Clone, Copy, Default)]
struct Rank {
    extra: u64,
    leak: u64,
    leak_from: u64,
    jitter: u64,
    last_batch: u64,
    /// One epoch whose floor is this much higher (a one-off).
    once: Option<(u64, u64)>,
    /// From this epoch on, this much higher (a step that stays).
    step: Option<(u64, u64)>,
}

fn rank_epochs(r: &Rank, n: u64, rng: &mut Rng) -> Vec<EpochPoint> {
    (0..n)
        .map(|e| {
            let j = (rng.unit() * r.jitter as f64) as u64;
            let mut floor = 6 * G + r.extra + j + e.saturating_sub(r.leak_from) * r.leak;
            if let Some((at, by)) = r.once
                && at == e
            {
                floor += by;
            }
            if let Some((from, by)) = r.step
                && e >= from
            {
                floor += by;
            }
            EpochPoint {
                epoch: e,
                t: (e as i64 + 1) * EPOCH_MS,
                floor,
                peak: Some(floor + 9 * G - r.last_batch),
                reserved: Some(floor + 10 * G),
            }
        })
        .collect()
}

/// The first epoch at which the engine raised a divergent-rank alert, and on which PID.
fn run(ranks: &[Rank], epochs: u64, seed: u64) -> Option<(u64, u32)> {
    let mut rng = Rng(seed);
    let series: Vec<Vec<EpochPoint>> = ranks
        .iter()
        .map(|r| rank_epochs(r, epochs, &mut rng))
        .collect();
    let mut engine = AlertEngine::new(AlertConfig::default());
    for n in 1..=epochs as usize {
        let procs: Vec<ProcView> = series
            .iter()
            .enumerate()
            .map(|(i, s)| ProcView {
                rank: Some(i as u32),
                job: Some("ddp.py@127.0.0.1:29500".into()),
                ..proc_view(
                    4000 + i as u32,
                    s[n - 1].reserved.unwrap_or(0),
                    Some(companion(s[..n].to_vec())),
                )
            })
            .collect();
        let snap: Snapshot = snapshot(n as i64 * EPOCH_MS, 60 * G, procs);
        for c in engine.evaluate_snapshot(&snap) {
            if c.change == ChangeKind::Raised && c.alert.kind == AlertKind::DivergentRank {
                return Some((n as u64 - 1, c.alert.pid.unwrap_or(0)));
            }
        }
    }
    None
}

const MIB: u64 = M;

#[test]
fn clean_jobs_never_raise_it() {
    let jitter = Rank {
        jitter: 6 * MIB,
        ..Rank::default()
    };
    let cases: Vec<(&str, Vec<Rank>)> = vec![
        ("jitter, 2 ranks", vec![jitter; 2]),
        ("jitter, 4 ranks", vec![jitter; 4]),
        (
            "rank 0 holds 1.4 GiB more",
            vec![
                Rank {
                    extra: 1400 * MIB,
                    ..jitter
                },
                jitter,
                jitter,
            ],
        ),
        (
            "rank 2's last batch is smaller",
            vec![
                jitter,
                jitter,
                Rank {
                    last_batch: 700 * MIB,
                    ..jitter
                },
            ],
        ),
        (
            "one rank steps up once and stays",
            vec![
                jitter,
                Rank {
                    step: Some((10, 300 * MIB)),
                    ..jitter
                },
            ],
        ),
        (
            "a one-off epoch on rank 1",
            vec![
                jitter,
                Rank {
                    once: Some((12, 900 * MIB)),
                    ..jitter
                },
            ],
        ),
        (
            "every rank grows together",
            vec![
                Rank {
                    leak: 24 * MIB,
                    ..jitter
                };
                3
            ],
        ),
    ];
    let mut alarms = 0;
    for (name, ranks) in &cases {
        for seed in 0..20 {
            if let Some((e, pid)) = run(ranks, 40, seed) {
                alarms += 1;
                eprintln!("false alarm: {name}, seed {seed}: PID {pid} at epoch {e}");
            }
        }
    }
    println!(
        "divergent rank, clean jobs: {alarms} false alarms in {} runs",
        cases.len() * 20
    );
    assert_eq!(alarms, 0);
}

#[test]
fn a_rank_that_keeps_more_each_epoch_is_named_within_a_few_epochs() {
    let jitter = Rank {
        jitter: 6 * MIB,
        ..Rank::default()
    };
    for (leak, ranks, who, within) in [(24, 2, 1, 8), (16, 4, 3, 10), (40, 3, 0, 8), (24, 8, 5, 8)]
    {
        let mut rs = vec![jitter; ranks];
        rs[who] = Rank {
            leak: leak * MIB,
            leak_from: 5,
            ..jitter
        };
        let mut delays = Vec::new();
        for seed in 0..10 {
            let (e, pid) = run(&rs, 40, seed).unwrap_or_else(|| {
                panic!("{leak} MiB/epoch on rank {who} of {ranks}, seed {seed}: not found")
            });
            assert_eq!(pid, 4000 + who as u32, "the leaking rank is named");
            delays.push(e - 5);
        }
        let worst = *delays.iter().max().expect("runs");
        println!(
            "divergent rank: {leak} MiB/epoch on rank {who} of {ranks}: found after {delays:?} epochs"
        );
        assert!(worst <= within, "{leak} MiB/epoch: {delays:?}");
    }
}
