//! Rank and Kubernetes labels on per-process series: present where known (a companion's hello,
//! the process's environment), absent otherwise so single-process series keep their labels.

use crate::support::export::*;
use gpumon::export::{Exporter, Format};
use gpumon::model::frame::Frame;
use gpumon::model::placement::{Kube, Slurm};
use gpumon::wire::{Hello, Message};

fn text(frames: &[Frame]) -> String {
    let ex = Exporter::new("h".into());
    ex.publish(&state_of(frames));
    ex.render(Format::Prometheus)
}

fn line<'a>(text: &'a str, family: &str, pid: u32) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(family) && l.contains(&format!("pid=\"{pid}\"")))
        .unwrap_or_else(|| panic!("no {family} for pid {pid} in\n{text}"))
}

fn distributed_on_kubernetes() -> Vec<Frame> {
    let mut frames = two_gpu_frames();
    for f in &mut frames {
        match f {
            Frame::Companion(c) => {
                if let Message::Hello(h) = &mut c.msg {
                    *h = Hello {
                        rank: Some(3),
                        local_rank: Some(1),
                        world_size: Some(8),
                        ..h.clone()
                    };
                }
            }
            Frame::Procs { procs, .. } => {
                for p in procs.iter_mut().filter(|p| p.pid == 5151) {
                    p.rank = Some(0);
                    p.kube = Some(Kube {
                        pod: Some("trainer-0".into()),
                        namespace: Some("ml".into()),
                        container: Some("pytorch".into()),
                        container_id: None,
                    });
                }
            }
            _ => {}
        }
    }
    frames
}

#[test]
fn the_companions_rank_labels_its_allocator_and_process_series() {
    let t = text(&distributed_on_kubernetes());
    for family in [
        "gpumon_allocator_allocated_bytes{",
        "gpumon_process_gpu_memory_used_bytes{",
    ] {
        let l = line(&t, family, 4242);
        assert!(
            l.contains("rank=\"3\"") && l.contains("local_rank=\"1\""),
            "{l}"
        );
    }
}

#[test]
fn rank_and_pod_from_the_environment_without_a_companion() {
    let t = text(&distributed_on_kubernetes());
    // GPU 1 failed in the last tick, so its processes have a peak but no current value.
    let l = line(&t, "gpumon_process_gpu_memory_peak_bytes{", 5151);
    for label in [
        "rank=\"0\"",
        "pod=\"trainer-0\"",
        "namespace=\"ml\"",
        "container=\"pytorch\"",
    ] {
        assert!(l.contains(label), "{label} missing: {l}");
    }
    assert!(
        !l.contains("container_id"),
        "unknown labels are absent: {l}"
    );
}

#[test]
fn plain_processes_keep_exactly_their_labels() {
    let t = text(&two_gpu_frames());
    for l in t.lines().filter(|l| l.contains("pid=\"")) {
        for label in ["rank=", "pod=", "namespace=", "container"] {
            assert!(!l.contains(label), "{l}");
        }
    }
}

/// Two tasks of one `srun` step without a launcher's RANK: Slurm's task ids rank them, the
/// job is named as Slurm names it, and the Slurm ids are labels of their own.
#[test]
fn slurm_tasks_are_ranked_and_labelled_by_their_job() {
    let mut frames = two_gpu_frames();
    for f in &mut frames {
        if let Frame::Procs { procs, .. } = f {
            for p in procs.iter_mut() {
                let task = if p.pid == 4242 { 0 } else { 1 };
                let mut s = Slurm::default();
                for v in [
                    "SLURM_JOB_ID=81235".to_string(),
                    "SLURM_STEP_ID=0".into(),
                    format!("SLURM_PROCID={task}"),
                    format!("SLURM_LOCALID={task}"),
                    "SLURM_STEP_NUM_TASKS=2".into(),
                    "SLURM_JOB_NODELIST=gpu[07-08]".into(),
                ] {
                    s.var(&v);
                }
                p.slurm = s.finish();
            }
        }
    }
    let t = text(&frames);
    for (pid, rank) in [(4242, 0), (5151, 1)] {
        let l = line(&t, "gpumon_process_gpu_memory_peak_bytes{", pid);
        for label in [
            format!("rank=\"{rank}\""),
            format!("local_rank=\"{rank}\""),
            "slurm_job_id=\"81235\"".into(),
            "slurm_nodelist=\"gpu[07-08]\"".into(),
            "@slurm:81235.0\"".into(),
        ] {
            assert!(l.contains(&label), "{label} missing: {l}");
        }
        assert!(!l.contains("slurm_array"), "unknown labels are absent: {l}");
    }
}
