//! A live H200 session recorded on 2026-12-01 by scripts/gpu/live_screens.sh (four
//! `gpumon watch` panes beside `gpumon record`): corpus3's frag_ownhole (PID 524), two leaks
//! (525 from epoch 0, 526 at 4 MiB per epoch), and two clean runs (527 clean_sched, 528
//! frag_ownhole's shape with expandable segments). Labels from the scenarios' own output,
//! not from gpumon's.

use serde_json::Value;

use crate::support::gpumon;

const FILE: &str = "tests/fixtures/h200_live_frag_leak.jsonl";

fn raised() -> Vec<Value> {
    let out = gpumon()
        .args(["replay", "--headless", FILE, "--alerts-jsonl", "-"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v["change"] == "raised")
        .collect()
}

#[test]
fn the_fragmentation_oom_is_foreseen_then_told_by_its_mechanism_and_clean_runs_stay_silent() {
    let r = raised();
    let of = |pid: u64| -> Vec<&Value> { r.iter().filter(|v| v["pid"] == pid).collect() };
    let frag = of(524);
    let kinds: Vec<&str> = frag.iter().filter_map(|v| v["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["fragmentation_risk", "fragmentation_oom"],
        "{frag:?}"
    );
    let (risk_at, oom_at) = (frag[0]["epoch"].as_u64(), frag[1]["epoch"].as_u64());
    assert!(
        risk_at < oom_at,
        "foreseen before the OOM: {risk_at:?} {oom_at:?}"
    );
    let msg = frag[1]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("8.00MiB short"), "{msg}");
    assert!(msg.contains("expandable_segments:True"), "{msg}");
    assert!(!msg.contains("smaller peak"), "{msg}");
    for leak in [525, 526] {
        let kinds: Vec<&str> = of(leak).iter().filter_map(|v| v["kind"].as_str()).collect();
        assert_eq!(kinds, ["growth"], "PID {leak}");
    }
    for clean in [527, 528] {
        assert!(of(clean).is_empty(), "PID {clean}: {:?}", of(clean));
    }
}

/// A slow leak forecast against the whole card (133 GiB over a 2 GiB process) keeps the
/// process chart on the data's scale: the ceiling is named above it, not drawn at the top
/// of a 150 GiB axis that flattens the leak into the baseline.
#[test]
fn the_report_keeps_a_leak_on_its_own_scale_when_its_ceiling_is_far() {
    let out = gpumon()
        .args(["report", FILE, "-o", "-"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = String::from_utf8_lossy(&out.stdout);
    let chart = |pid: u32| -> String {
        let at = page
            .find(&format!("PID {pid} on GPU 0: memory over time"))
            .unwrap_or_else(|| panic!("no chart for PID {pid}"));
        let end = page[at..].find("</svg>").map_or(page.len(), |e| at + e);
        page[at..end].to_string()
    };
    for pid in [525, 526] {
        let c = chart(pid);
        assert!(
            c.contains("above this scale"),
            "PID {pid}: the far ceiling is named"
        );
        assert!(
            !c.contains(">150 GiB<"),
            "PID {pid}: the axis stays on the data"
        );
    }
}
