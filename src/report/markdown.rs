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
        "| PID | GPU | peak (NVML) | peak reserved | epochs | OOMs | last seen | ended | command |\n|---|---|---|---|---|---|---|---|---|"
    );
    for p in &run.procs {
        let d = p.dev.as_ref();
        let resv = d
            .and_then(|d| d.reserved.range())
            .map(|r| human(r.1 as u64))
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.pid,
            p.gpu.map_or("?".into(), |g| g.to_string()),
            p.nvml_peak.map_or("–".into(), |(_, v)| human(v)),
            resv,
            d.map_or(0, |d| d.epochs.len()),
            d.map_or(0, |d| d.ooms.len()),
            p.last_seen().map(utc).unwrap_or_default(),
            run.ends.get(&p.pid).map_or("–", |e| e.cause.label()),
            md(&crate::report::charts::short(&p.name))
        );
    }
    let left_out = run.dropped.lines();
    if !left_out.is_empty() {
        let _ = writeln!(o, "\n## Left out of this report\n");
        for line in &left_out {
            let _ = writeln!(o, "- {}", md(line));
        }
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

/// Text from a recording in a Markdown table cell or list item, inert: no pipes, no line
/// breaks, no HTML tag, and no link, image or emphasis (a command line
/// `x ![ok](https://evil.example/all-green.png)` rendered a remote image in the PR or job
/// summary the page goes to). Markdown's punctuation is backslash-escaped, and so are the
/// `:` of `://`, the `.` of `www.` and `@`, which GitHub's autolinking would make links of.
/// Backticks pass: a code span is inert, and the remedies quote settings in them.
fn md(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 8);
    let b = s.as_bytes();
    for (i, c) in s.char_indices() {
        match c {
            '\n' | '\r' => o.push(' '),
            '\\' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '!' | '@' | '#' => {
                o.push('\\');
                o.push(c);
            }
            ':' if b[i + 1..].starts_with(b"//") => o.push_str("\\:"),
            '.' if i >= 3 && b[i - 3..i].eq_ignore_ascii_case(b"www") => o.push_str("\\."),
            _ => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a renderer can make a link, an image or a tag of: an unescaped `[`, `]`, `<`,
    /// `!`, `://`, `www.` or `@`.
    fn live_markup(text: &str) -> Option<usize> {
        let b = text.as_bytes();
        let escaped = |i: usize| {
            // An odd number of backslashes before `i`.
            b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1
        };
        (0..b.len()).find(|&i| {
            let at = |s: &[u8]| b[i..].starts_with(s);
            let live = matches!(b[i], b'[' | b']' | b'<' | b'!' | b'@')
                || at(b"://")
                || (b[i] == b'.' && i >= 3 && b[i - 3..i].eq_ignore_ascii_case(b"www"));
            live && !escaped(i)
        })
    }

    #[test]
    fn links_images_and_tags_from_a_recording_are_inert() {
        for payload in [
            "x ![ok](https://evil.example/all-green.png)",
            "[t](javascript:alert(1))",
            "<img src=x onerror=alert(1)> <https://evil.example>",
            "see www.evil.example or mail a@evil.example",
            "**bold** _it_ `code` ~~s~~ # h | pipe \\[x](y)",
            "a\\\\![x](y)",
        ] {
            let out = md(payload);
            assert_eq!(live_markup(&out), None, "{payload:?} -> {out:?}");
            assert!(!out.contains('\n'));
        }
        // Ordinary text reads as it was.
        assert_eq!(
            md("python3 train.py --lr 3e-4"),
            "python3 train.py --lr 3e-4"
        );
        assert_eq!(md("1 MiB < 2 MiB"), "1 MiB \\< 2 MiB");
        assert_eq!(live_markup("![x](y)"), Some(0), "the check sees an image");
    }
}
