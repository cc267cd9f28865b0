//! The report of a recording with distributed jobs (tests/corpus_jobs, four real H200 jobs):
//! a "Distributed jobs" section with one card per job, its ranks side by side on one chart,
//! the divergent rank named in the legend and marked where the alert was raised; the
//! per-process cards say each rank.

use std::path::Path;

use crate::report::report_html;

/// The card of `job` in the page: from its title to the next card.
fn card<'a>(page: &'a str, job: &str) -> &'a str {
    let at = page
        .find(&format!("<h3>{job} · "))
        .unwrap_or_else(|| panic!("no card for {job}"));
    let rest = &page[at..];
    let end = rest[4..].find("<h3>").map_or(rest.len(), |e| e + 4);
    &rest[..end]
}

#[test]
fn the_report_has_each_job_with_its_ranks_side_by_side_and_the_divergent_one_marked() {
    let page = report_html(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_jobs/jobs.gpumon.jsonl.gz"),
    );
    let jobs = &page[page.find(r#"<section id="jobs">"#).expect("a jobs section")..];
    let jobs = &jobs[..jobs.find("</section>").expect("section end")];
    assert_eq!(
        jobs.matches(r#"<div class="card">"#).count(),
        4,
        "four jobs"
    );
    // The mp.spawn job whose rank 1 kept 24 MiB per epoch: both ranks on one chart.
    let leak = card(jobs, "python3@634");
    assert!(leak.contains("2 of 2 ranks"), "{leak}");
    assert_eq!(leak.matches("<svg").count(), 1, "one chart");
    assert!(leak.contains("rank 0 · PID 634 · allocated</li>"), "{leak}");
    assert!(
        leak.contains("rank 1 · PID 635 · allocated · the divergent rank: 120 MiB more than its peers when named, +24.0 MiB/epoch"),
        "{leak}"
    );
    assert!(
        leak.contains("divergent rank · PID 635"),
        "the raise is marked"
    );
    // torchrun's rank 0 that leaks 12 MiB per epoch.
    assert!(card(jobs, "job.py@650").contains("rank 0 · PID 650 · allocated · the divergent rank"));
    // The constant extra and the clean job: no divergent rank.
    for quiet in ["job.py@638", "python3@591"] {
        let c = card(jobs, quiet);
        assert!(!c.contains("divergent"), "{quiet}: {c}");
    }
    assert!(card(jobs, "job.py@638").contains("3 of 3 ranks"));
    // The per-process cards say the rank.
    assert!(
        page.contains("<h3>[rank 1] PID 635 · GPU 0"),
        "per-process card"
    );
}

/// Spawned ranks' command lines are the `multiprocessing` bootstrap (`python3 -c from
/// multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)`): the
/// chart legends name them by their launcher's script and rank, as the screens do, on a live
/// H200 recording that holds the process tree.
#[test]
fn spawned_ranks_are_labelled_by_their_script_in_the_chart_legends() {
    let page = report_html(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_jobs/spawn_live.gpumon.jsonl.gz"),
    );
    let legends: Vec<&str> = page
        .split(r#"<ul class="legend">"#)
        .skip(1)
        .map(|l| &l[..l.find("</ul>").expect("legend end")])
        .collect();
    assert!(!legends.is_empty(), "no chart legend");
    let all = legends.concat();
    for rank in [
        "PID 544 [rank 0] job.py --spawn 2",
        "PID 545 [rank 1] job.py --spawn 2",
    ] {
        assert!(all.contains(rank), "{rank} not in the legends: {all}");
    }
    for raw in ["pipe_handle", "spawn_main", "multiprocessing"] {
        assert!(
            !all.contains(raw),
            "a legend shows the bootstrap ({raw}): {all}"
        );
    }
}
