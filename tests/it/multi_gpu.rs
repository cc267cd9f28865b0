//! Two real H200s: processes started with CUDA_VISIBLE_DEVICES in each form (`1`, `1,0`, a
//! UUID list, a UUID prefix, with and without PCI order, unset), each holding a distinct,
//! known amount per device and printing which physical card each of its devices is. gpumon
//! must give every process the right logical index and bytes on every card, from NVML and
//! from the companion.

use crate::support::{self, app_from, render, theme, with_view};
use gpumon::model::mapping::Mapping;
use gpumon::tui::app::View;
use serde_json::Value;

const REC: &str = "h200x2_cvd.jsonl";

fn truth() -> Vec<Value> {
    let text = std::fs::read_to_string(support::fixture("h200x2_cvd_truth.jsonl")).expect("truth");
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn every_process_gets_the_right_logical_index_and_bytes_on_every_card() {
    // 20 s in, every process holds its memory (they start within 2 s and hold 30 s).
    let app = app_from(REC, Some(20_000));
    let s = &app.pipe.state;
    let mut checked = 0;
    for t in truth() {
        let Some(uuid) = t["uuid"].as_str() else {
            continue;
        };
        let pid = t["pid"].as_u64().expect("pid") as u32;
        let logical = t["logical"].as_u64().expect("logical") as u32;
        let bytes = t["bytes"].as_u64().expect("bytes");
        let g = s
            .gpus
            .iter()
            .find(|g| g.info.uuid == uuid)
            .expect("card in recording");
        let p = s
            .procs
            .get(&pid)
            .unwrap_or_else(|| panic!("pid {pid} not seen"));
        let pg = p
            .gpus
            .get(&g.info.index)
            .unwrap_or_else(|| panic!("pid {pid} not on {uuid}"));
        match &pg.mapping {
            Mapping::Logical {
                index, uncertain, ..
            } => {
                assert_eq!(
                    *index, logical,
                    "{}: pid {pid} on GPU {}",
                    t["tag"], g.info.index
                );
                // Identical cards: fastest-first equals PCI order, so nothing is uncertain.
                assert_eq!(uncertain, &None, "{}", t["tag"]);
            }
            other => panic!("{}: pid {pid} mapping {other:?}", t["tag"]),
        }
        // NVML sees the tensor plus the CUDA context: more than the tensor, never less.
        let used = pg.last_used.expect("NVML reports per-process bytes");
        assert!(
            used > bytes && used < bytes + (1 << 30),
            "{}: NVML {used} vs {bytes}",
            t["tag"]
        );
        // The companion (all but the unset case run it) reports exactly the tensor's bytes.
        if let Some(dev) = s.live_alloc_on(pid, g.info.index) {
            assert_eq!(
                dev.allocated_now(),
                Some(bytes),
                "{}: companion allocated",
                t["tag"]
            );
        } else {
            assert_eq!(
                t["tag"], "cvd_unset",
                "companion data missing for {}",
                t["tag"]
            );
        }
        checked += 1;
    }
    assert_eq!(
        checked, 10,
        "every (process, card) pair of the run was checked"
    );
}

#[test]
fn two_gpu_screens_80x24_and_40x12() {
    let app = app_from(REC, Some(20_000));
    insta::assert_snapshot!("overview_80x24", render(&app, 80, 24, &theme(false)));
    insta::assert_snapshot!("overview_40x12", render(&app, 40, 12, &theme(false)));
    let detail = with_view(app_from(REC, Some(20_000)), View::Detail);
    insta::assert_snapshot!("detail_80x24", render(&detail, 80, 24, &theme(false)));
    insta::assert_snapshot!("detail_40x12", render(&detail, 40, 12, &theme(true)));
}
