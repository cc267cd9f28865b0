//! The report of a recording with distributed jobs (tests/corpus_jobs, four real H200 jobs):
//! a "Distributed jobs" section with one card per job, its ranks side by side on one chart,
//! the divergent rank named in the legend and marked where the alert was raised; the
//! per-process cards say each rank.

use std::path::Path;

use crate::support::gpumon;

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
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_jobs/jobs.gpumon.jsonl.gz");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("jobs.html");
    gpumon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let page = std::fs::read_to_string(&out).expect("page");
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
