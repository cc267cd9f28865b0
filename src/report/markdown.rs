//! The run in plain Markdown, for a CI log or a pull request: the summary, a line per GPU
//! and per process, and every alert change as a line a person reads.

use std::fmt::Write;

use crate::fmt::human;
use crate::report::collect::Run;
use crate::report::summary::{self, utc, when};

pub fn markdown(run: &Run) -> String {
    let mut o = String::new();
    let name = run.file.rsplit('/').next().unwrap_or(&run.file);
    let _ = writeln!(o, "# gpumon report: {}\n", md(name));
    let _ = writeln!(o, "{}\n", md(&summary::overview(run)));
    let _ = writeln!(o, "## Summary\n");
    let items = summary::items(run);
    if items.is_empty() {
        let _ = writeln!(o, "No alert was raised in this recording.\n");
    }
    for i in &items {
        let _ = write!(
            o,
            "- **{} · {}** {}",
            i.severity.label(),
            i.kind.label(),
            md(&i.headline)
        );
        if let Some(out) = &i.outcome {
            let _ = write!(o, " {}", md(out));
        }
        if let Some(r) = &i.remedy {
            let _ = write!(o, " Remedy: {}", md(r));
        }
        o.push('\n');
    }
    let _ = writeln!(o, "\n## GPUs\n");
    let _ = writeln!(
        o,
        "| GPU | name | total | peak used | when |\n|---|---|---|---|---|"
    );
    for g in &run.gpus {
        let (peak, at) = g
            .peak
            .map(|(t, v)| (human(v), when(run, t, None)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            g.info.index,
            md(&g.info.name),
            human(g.total),
            peak,
            md(&at)
        );
    }
    let _ = writeln!(o, "\n## Processes\n");
    let _ = writeln!(
        o,
        "| PID | GPU | peak (NVML) | peak reserved | epochs | OOMs | last seen | command |\n|---|---|---|---|---|---|---|---|"
    );
    for p in &run.procs {
        let d = p.dev.as_ref();
        let resv = d
            .and_then(|d| d.reserved.range())
            .map(|r| human(r.1 as u64))
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            p.pid,
            p.gpu.map_or("?".into(), |g| g.to_string()),
            p.nvml_peak.map_or("–".into(), |(_, v)| human(v)),
            resv,
            d.map_or(0, |d| d.epochs.len()),
            d.map_or(0, |d| d.ooms.len()),
            p.last_seen().map(utc).unwrap_or_default(),
            md(&crate::report::charts::short(&p.name))
        );
    }
    if !run.alerts.is_empty() {
        // One readable line per change; the JSON lines are `--alerts-jsonl`'s to give.
        let _ = writeln!(
            o,
            "\n## Alerts\n\nEvery change, in order (`gpumon replay FILE --headless --alerts-jsonl -` gives them as JSON lines).\n"
        );
        for a in &run.alerts {
            let epoch = a.epoch.map_or_else(String::new, |e| format!(" epoch {e}"));
            let who = a.pid.map_or_else(
                || format!("GPU {}", a.gpu),
                |p| format!("PID {p} GPU {}", a.gpu),
            );
            let _ = writeln!(
                o,
                "- {} {} {} · {}{epoch} · {}",
                md(&when(run, a.at, None)),
                a.change.label(),
                a.severity.label(),
                who,
                md(&a.summary)
            );
        }
    }
    o
}

/// Text in a Markdown table cell or list item: no pipes, no line breaks, no HTML tag (a
/// `<` before a letter would open one; `1 MiB < 2 MiB` stays as written).
fn md(s: &str) -> String {
    let s = s.replace('|', "\\|").replace(['\n', '\r'], " ");
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '<'
            && it
                .peek()
                .is_some_and(|n| n.is_alphabetic() || matches!(n, '/' | '!' | '?'))
        {
            o.push_str("&lt;");
        } else {
            o.push(c);
        }
    }
    o
}
