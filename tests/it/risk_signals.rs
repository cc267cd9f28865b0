//! What a person sees on the third corpus's recording, through the same App the
//! terminal draws: F's colour follows the fragmentation risk, which turns before the OOM of
//! a fragmentation run and never on the clean capped runs beside it (with room, or with
//! expandable segments); the GROWTH sort ranks slow leaks above clean runs whose batch
//! size steps.

use std::collections::BTreeMap;

use gpumon::model::alerts::Severity;
use gpumon::tui::selection::{Sort, SortKey, rows};
use gpumon::tui::ui::alerts::frag_risk;
use serde_json::Value;

use gpumon::model::frame::Frame;
use gpumon::pipeline::Pipeline;
use gpumon::tui::app::{App, SourceKind};

use crate::support::{fixture, frames};

const REC: &str = "../corpus3/corpus3.jsonl";

/// scenario name -> (pid, OOM time), from the runs' own truth.
fn truth() -> BTreeMap<String, (u32, Option<i64>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus3");
    std::fs::read_to_string(dir.join("truth3.jsonl"))
        .expect("truth")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "truth")
        .map(|v| {
            (
                v["scenario"].as_str().unwrap_or_default().to_string(),
                (
                    v["pid"].as_u64().unwrap_or(0) as u32,
                    v["oom_t_ms"].as_i64(),
                ),
            )
        })
        .collect()
}

/// Replays the recording once, calling `check` at each checkpoint (ms into the recording,
/// in order) with the app as it is then: one pass over the 5 MB recording, not one each.
fn replay_with(checkpoints: &[i64], mut check: impl FnMut(i64, &App)) {
    let path = fixture(REC);
    let all = frames(&path);
    let t0 = all.first().map(Frame::time).unwrap_or(0);
    let mut app = App::new(
        SourceKind::Replay {
            file: path.display().to_string(),
            demo: false,
        },
        Pipeline::default(),
    );
    let mut next = checkpoints.iter().peekable();
    for f in &all {
        while let Some(&&at) = next.peek() {
            if f.time() <= t0 + at {
                break;
            }
            check(at, &app);
            next.next();
        }
        app.apply(f);
    }
    for &at in next {
        check(at, &app);
    }
}

fn started() -> i64 {
    let first = std::fs::read_to_string(fixture(REC)).expect("recording");
    let head: Value = serde_json::from_str(first.lines().next().expect("header")).expect("json");
    head["started"].as_i64().expect("started")
}

#[test]
fn f_turns_before_the_fragmentation_oom_and_growth_sort_finds_the_leaks() {
    let t = truth();
    let t0 = started();
    // two seconds before each fragmentation OOM (more than one epoch: epochs last about
    // one second), and to the end of the clean runs
    let before = |name: &str| t[name].1.expect("an OOM") - t0 - 2_000;
    let mut points = [
        (before("frag_ownhole"), "frag_ownhole"),
        (before("frag_pinned"), "frag_pinned"),
        (before("expandable_pinned"), "expandable_pinned"),
        (60_000, "sort"),
        (150_000, "sort"),
        (200_000, "end"),
    ];
    points.sort();
    let at: Vec<i64> = points.iter().map(|p| p.0).collect();
    let mut checked = 0;
    replay_with(&at, |ms, app| {
        let what = points.iter().find(|p| p.0 == ms).map_or("", |p| p.1);
        checked += 1;
        for clean in ["clean_ownhole_room", "clean_expandable_cap", "clean_sched"] {
            assert_eq!(frag_risk(app, t[clean].0, 0), None, "{clean} at {ms} ms");
        }
        if what.starts_with("frag_") {
            assert!(
                frag_risk(app, t[what].0, 0).is_some_and(|s| s >= Severity::Warning),
                "{what}: no risk 2 s before its OOM"
            );
        }
        if what == "expandable_pinned" {
            // A leak in 140 MiB steps under a cap with expandable segments: no hole to
            // fragment, so no fragmentation risk, but the staircase rule sees the next
            // step not fitting (critical from epoch 42, the OOM came in 48).
            let pid = t[what].0;
            assert_eq!(frag_risk(app, pid, 0), None, "{what}: not fragmentation");
            let growth =
                app.pipe.alerts.active().into_iter().find(|a| {
                    a.pid == Some(pid) && a.kind == gpumon::model::alerts::AlertKind::Growth
                });
            assert_eq!(
                growth.map(|a| a.severity),
                Some(Severity::Critical),
                "{what}: the staircase 2 s before its OOM"
            );
        }
        if what == "sort" {
            // 60 s: clean_sched's batch has stepped three times, clean_sched_b's twice
            growth_sort_ranks_leaks_first(app, &t, ms);
        }
    });
    assert_eq!(checked, points.len());
}

fn growth_sort_ranks_leaks_first(app: &App, t: &BTreeMap<String, (u32, Option<i64>)>, at: i64) {
    let sort = Sort {
        key: SortKey::Growth,
        desc: true,
    };
    let order: Vec<u32> = rows(&app.pipe.state, 0, sort, "")
        .iter()
        .map(|(p, _)| p.info.pid)
        .collect();
    let pos = |name: &str| {
        order
            .iter()
            .position(|p| *p == t[name].0)
            .unwrap_or_else(|| panic!("{name} listed at {at}"))
    };
    for leak in ["slow_leak_2", "slow_leak_3", "slow_leak_4", "leak_epoch0"] {
        for clean in ["clean_sched", "clean_sched_b", "clean_ownhole_room"] {
            assert!(
                pos(leak) < pos(clean),
                "{leak} below {clean} at {at} ms: {order:?}"
            );
        }
    }
}
