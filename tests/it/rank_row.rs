//! The process row says which rank of a distributed job a process is, read from the `RANK`
//! in its environment (so also without a companion); a plain process row is unchanged.

use crate::support::export::*;
use gpumon::model::frame::Frame;
use gpumon::tui::ui::procs::proc_line;
use gpumon::tui::ui::theme::Theme;

fn row(frames: &[Frame], pid: u32) -> String {
    let s = state_of(frames);
    let p = &s.procs[&pid];
    let pg = p.gpus.values().next().expect("on a GPU");
    proc_line(p, pg, 100, &Theme::default())
        .spans
        .iter()
        .map(|s| s.content.to_string())
        .collect()
}

#[test]
fn ranks_are_marked_in_the_process_row() {
    let mut frames = two_gpu_frames();
    for f in &mut frames {
        if let Frame::Procs { procs, .. } = f {
            for p in procs.iter_mut().filter(|p| p.pid == 5151) {
                p.rank = Some(3);
            }
        }
    }
    let r = row(&frames, 5151);
    assert!(r.contains("[rank 3] python3"), "{r}");
    let plain = row(&two_gpu_frames(), 5151);
    assert!(!plain.contains("rank"), "{plain}");
}
