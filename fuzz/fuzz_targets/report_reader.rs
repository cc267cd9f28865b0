//! A recording handed to `gpumon report`: the report's replay reads it or names the
//! problem, never panics, and keeps its caps (GPUs, process rows, companions; frames
//! outside the run's time left out), so both pages stay bounded whatever the file says.
#![no_main]

use std::io::Write;

use gpumon::pipeline::Pipeline;
use gpumon::report::collect::{MAX_COMPANIONS, MAX_DEVS, MAX_GPUS, MAX_PROCS};
use gpumon::report::{feed, html, markdown};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("gpumon-fuzz-report-{}.jsonl", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).expect("temp file");
        f.write_all(data).expect("write");
    }
    let Ok(run) = feed::replay_run(&path, Pipeline::default()) else {
        return;
    };
    // The header's GPUs and those ticks name, each kept at most once.
    assert!(run.gpus.len() <= MAX_GPUS);
    // Rows NVML listed, plus companion devices never placed on a GPU.
    assert!(run.procs.len() <= MAX_PROCS + MAX_DEVS);
    assert!(run.companions.len() <= MAX_COMPANIONS);
    let start = run.header.started;
    assert!(run.end >= run.start && run.end <= start.saturating_add(366 * 86_400_000));
    let page = html::page(&run);
    let md = markdown::markdown(&run);
    assert!(page.len() < 64 << 20 && md.len() < 16 << 20);
});
