//! `gpumon report` on every bundled recording: the summary names each alert the replay
//! raised (taken from `replay --headless --alerts-jsonl -`, not written down here), the
//! page quotes those alert lines verbatim, the Markdown says the same; bad input is a clear
//! error that leaves no page behind; `record --report` writes the page when the recording
//! ends, by its duration or by SIGTERM.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::gpumon;
use gpumon::model::alerts::AlertKind;

pub fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("assets/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".gpumon.jsonl.gz"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "the bundled recordings: {v:?}");
    v
}

/// The alert lines a headless replay prints for `file`.
pub fn alert_lines(file: &Path) -> Vec<String> {
    let out = gpumon()
        .args(["replay", "--headless", "--alerts-jsonl", "-"])
        .arg(file)
        .output()
        .expect("replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

/// `(kind, pid, gpu)` of every alert the lines raise.
pub fn raised(lines: &[String]) -> Vec<(AlertKind, Option<u32>, u32)> {
    let mut keys: Vec<_> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|v| v["change"] == "raised")
        .map(|v| {
            let kind: AlertKind = serde_json::from_value(v["kind"].clone()).expect("kind");
            let pid = v["pid"].as_u64().map(|p| p as u32);
            (kind, pid, v["gpu"].as_u64().expect("gpu") as u32)
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// What a person reads of `html` between two markers, without tags or entities.
pub fn text_between(html: &str, from: &str, to: &str) -> String {
    let start = html.find(from).expect("start marker");
    let end = start + html[start..].find(to).expect("end marker");
    let mut out = String::new();
    let mut in_tag = false;
    for c in html[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
}

/// Whether `text` names an alert: `PID 788 on GPU 1` and its kind's label (in any case: a
/// browser's innerText carries the badge's CSS upper case).
pub fn named(text: &str, (kind, pid, gpu): (AlertKind, Option<u32>, u32)) -> bool {
    let who = match pid {
        Some(p) => format!("PID {p} on GPU {gpu}"),
        None => format!("GPU {gpu}"),
    };
    text.contains(&who) && text.to_lowercase().contains(&kind.label().to_lowercase())
}

#[test]
fn every_bundled_recording_reports_each_of_its_alerts_in_the_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut total = 0;
    for rec in recordings() {
        let lines = alert_lines(&rec);
        let keys = raised(&lines);
        total += keys.len();
        let out = dir.path().join("r.html");
        gpumon()
            .arg("report")
            .arg(&rec)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        let html = std::fs::read_to_string(&out).expect("page written");
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>"));
        // Self-contained: nothing to fetch, nothing to run.
        for banned in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(banned), "{}: {banned}", rec.display());
        }
        // One summary item per alert, each naming its process, GPU and kind.
        for (kind, pid, gpu) in &keys {
            let key = format!(
                "data-alert=\"{}:{}:{gpu}\"",
                serde_json::to_value(kind)
                    .expect("kind")
                    .as_str()
                    .expect("str"),
                pid.map(|p| p.to_string()).unwrap_or_default()
            );
            let at = html
                .find(&key)
                .unwrap_or_else(|| panic!("{}: no summary item {key}", rec.display()));
            let item = text_between(&html[at..], "", "</li>");
            assert!(
                named(&item, (*kind, *pid, *gpu)),
                "{}: the item does not name {kind:?} {pid:?} {gpu}: {item}",
                rec.display()
            );
        }
        let start = html.find("<section id=\"summary\">").expect("a summary");
        let raw_summary = &html[start..start + html[start..].find("</section>").expect("end")];
        assert_eq!(
            raw_summary.matches("data-alert=").count(),
            keys.len(),
            "{}: one item per alert and no other",
            rec.display()
        );
        let summary = text_between(&html, "<section id=\"summary\">", "</section>");
        if keys.is_empty() {
            assert!(summary.contains("No alert was raised"), "{summary}");
        }
        // Every alert change is quoted exactly as --alerts-jsonl wrote it.
        for l in &lines {
            let quoted = l
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
                .replace('\'', "&#39;");
            assert!(
                html.contains(&quoted),
                "{}: line not quoted: {l}",
                rec.display()
            );
        }
        // A chart per GPU, and one per process.
        assert!(html.matches("<svg class=\"chart\" id=\"gpu-").count() >= 1);
        assert!(html.matches("<svg class=\"chart\" id=\"proc-").count() >= 1);

        // The Markdown says the same, and quotes the same lines.
        let md = gpumon()
            .arg("report")
            .arg(&rec)
            .args(["--format", "md"])
            .output()
            .expect("md");
        assert!(md.status.success());
        let md = String::from_utf8(md.stdout).expect("utf-8");
        let md_summary = md
            .split("## Summary")
            .nth(1)
            .and_then(|s| s.split("## GPUs").next())
            .expect("a summary section");
        for k in &keys {
            let line = md_summary
                .lines()
                .find(|l| l.contains(&format!("· {}**", k.0.label())) && named(l, *k))
                .unwrap_or_else(|| panic!("{}: md names no {k:?}:\n{md_summary}", rec.display()));
            assert!(line.starts_with("- **"), "{line}");
        }
        // Every alert change as a readable line with its summary, not its JSON.
        for l in &lines {
            let v: serde_json::Value = serde_json::from_str(l).expect("an alert line");
            let summary = v["summary"].as_str().expect("summary");
            // Markdown escapes what a recording says (`\@`, `\<`): read it unescaped.
            assert!(
                md.lines().any(|m| m.starts_with("- ")
                    && m.replace('\\', "").ends_with(&format!("· {summary}"))),
                "md lacks a line for {summary}"
            );
            assert!(!md.contains(l.as_str()), "md pastes raw JSON: {l}");
        }
    }
    assert!(total >= 10, "the bundled recordings raise alerts: {total}");
}

#[test]
fn a_missing_or_corrupt_recording_is_a_clear_error_and_leaves_no_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.html");
    let missing = dir.path().join("none.gpumon.jsonl");
    let o = gpumon()
        .arg("report")
        .arg(&missing)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot open recording") && err.contains("none.gpumon.jsonl"),
        "{err}"
    );
    assert!(!out.exists());

    // A good start, then garbage: the line is skipped and named, the page told from the rest.
    let good = crate::support::read_text(&recordings()[0]);
    let mut text: String = good.lines().take(50).collect::<Vec<_>>().join("\n");
    text.push_str("\n{\"type\":\"tick\",\"t\":oops}\n");
    let bad = dir.path().join("bad.gpumon.jsonl");
    std::fs::write(&bad, &text).expect("write");
    let skipped = dir.path().join("skipped.html");
    let o = gpumon()
        .arg("report")
        .arg(&bad)
        .arg("-o")
        .arg(&skipped)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("bad.gpumon.jsonl: skipped 1 corrupt line (line 51, column"),
        "{err}"
    );
    assert!(skipped.exists());
    // A broken header is no recording: the error names the line, and an older page survives.
    let body: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&bad, format!("{{oops\n{}\n", body.join("\n"))).expect("write");
    std::fs::write(&out, "old page").expect("write");
    let o = gpumon()
        .arg("report")
        .arg(&bad)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.gpumon.jsonl:1:"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).expect("kept"), "old page");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn without_o_the_page_lands_next_to_the_recording() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("night.gpumon.jsonl");
    std::fs::copy(&recordings()[0], &rec).expect("copy");
    gpumon()
        .arg("report")
        .arg(&rec)
        .assert()
        .success()
        .stderr(predicates::str::contains("night.report.html"));
    assert!(dir.path().join("night.report.html").exists());
}

fn record_cmd(dir: &Path) -> (std::process::Command, PathBuf, PathBuf) {
    let rec = dir.join("r.gpumon.jsonl");
    let page = dir.join("r.html");
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin!("gpumon"));
    c.env("RUST_BACKTRACE", "0").env_remove("GPUMON_PRELOAD");
    c.args(["record", "--interval", "100ms", "--socket-dir"])
        .arg(dir.join("sock"))
        .arg("-o")
        .arg(&rec)
        .arg("--report")
        .arg(&page);
    (c, rec, page)
}

#[test]
fn record_writes_its_report_when_the_duration_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, rec, page) = record_cmd(dir.path());
    c.args(["--duration", "600ms"]);
    assert_cmd::Command::from_std(c).assert().success();
    assert!(rec.exists());
    let html = std::fs::read_to_string(&page).expect("report written");
    assert!(html.contains("<section id=\"summary\">"), "{html}");
    assert!(html.contains("r.gpumon.jsonl"));
}

#[test]
fn record_writes_its_report_on_sigterm_and_sigint() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, rec, page) = record_cmd(dir.path());
        c.stderr(std::process::Stdio::piped());
        let child = c.spawn().expect("record starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        // Started once its header is on disk, plus a few ticks.
        while std::fs::metadata(&rec).map_or(true, |m| m.len() == 0) {
            assert!(Instant::now() < deadline, "no recording");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(400));
        // SAFETY: a plain kill(2) of the child we started.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().expect("exits");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "signal {sig}: {err}");
        assert!(err.contains("report written to"), "{err}");
        let html = std::fs::read_to_string(&page).expect("report written");
        assert!(html.ends_with("</html>"));
    }
}

/// A process's card shows its whole command line (the arguments that tell runs apart come
/// last), where the legends cut it to 60 characters.
#[test]
fn a_process_card_shows_the_whole_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.html");
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-leaks.gpumon.jsonl.gz");
    gpumon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let html = std::fs::read_to_string(&out).expect("page written");
    let cmd = "scripts/gpu/corpus/scenario.py --name grab_all --deadline 1795971387 --hold-until 1795971395</code></p>";
    assert!(html.contains(cmd), "the card's command line is whole");
}

/// A process the OOM ended says so on its card, as its row in the live view does (`OOM`),
/// and one that exited without one is only "gone": corpus4's six OOM runs and the rest.
/// A process an OOM ended reads `OOM` in every view: its row's USED cell from the moment
/// NVML stops listing it (never `gone` beside its OOM alert while the exit's grace runs),
/// and its report card, at the time the row's model gives.
#[test]
fn a_process_ended_by_an_oom_reads_oom_in_every_view() {
    use gpumon::tui::ui::proc_column::{ProcColumn, RowCtx};
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus4/corpus4.gpumon.jsonl.gz");
    let ooms: Vec<u32> = std::fs::read_to_string(rec.with_file_name("truth4.jsonl"))
        .expect("truth")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|t| t["oom_epoch"].is_u64())
        .map(|t| t["pid"].as_u64().expect("pid") as u32)
        .collect();
    assert_eq!(ooms.len(), 6);

    // The live view, tick by tick: each OOM process's USED cell once it has no bytes.
    let mut app = gpumon::tui::app::App::new(
        gpumon::tui::app::SourceKind::Replay {
            file: rec.display().to_string(),
            demo: false,
        },
        gpumon::pipeline::Pipeline::default(),
    );
    let theme = crate::support::theme(true);
    let mut words: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for f in crate::support::frames(&rec) {
        app.apply(&f);
        if !matches!(f, gpumon::model::frame::Frame::Tick(_)) {
            continue;
        }
        let s = app.view_state();
        for pid in &ooms {
            let Some(p) = s.procs.get(pid) else { continue };
            for pg in p.gpus.values().filter(|pg| pg.last_used.is_none()) {
                let r = RowCtx {
                    p,
                    pg,
                    now: s.now,
                    state: Some(s),
                    theme: &theme,
                };
                let cell = (ProcColumn::Used.spec().cell)(&r, 9);
                let text: String = cell.iter().map(|s| s.content.to_string()).collect();
                words.entry(*pid).or_default().push(text);
            }
        }
    }
    let ends: std::collections::BTreeMap<u32, i64> = ooms
        .iter()
        .map(|pid| {
            let s = app.view_state();
            let e = s.ending(&s.procs[pid]).expect("ended");
            (*pid, e.at)
        })
        .collect();
    for pid in &ooms {
        let w = &words[pid];
        assert!(
            !w.is_empty() && w.iter().all(|t| t == "OOM"),
            "PID {pid}'s row after its last reading: {w:?}"
        );
    }

    // The report's card of each says the same word, at the same time.
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("r.html");
    let out = gpumon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&page)
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).expect("page");
    for (pid, at) in ends {
        let clock = gpumon::report::summary::utc(at);
        let title = html
            .split("<h3>")
            .skip(1)
            .find(|h| h.starts_with(&format!("PID {pid} ")))
            .and_then(|h| h.split("</h3>").next())
            .unwrap_or_else(|| panic!("PID {pid}'s card"));
        assert!(
            title.contains(&format!("· OOM at {clock}")),
            "PID {pid}: {title}"
        );
    }
    assert!(
        !html.contains("gone after"),
        "no process left for no known cause"
    );
}

/// A report page written for `rec`.
pub(crate) fn report_html(rec: &Path) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("r.html");
    let out = gpumon()
        .arg("report")
        .arg(rec)
        .arg("-o")
        .arg(&page)
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&page).expect("page")
}

/// One allocator panel: its heading, and its readings (`what, when`) with their rows.
struct Panel {
    pid: u64,
    head: String,
    readings: Vec<(String, Vec<String>)>,
}

/// Every panel of the page's allocator section, each row under the reading it follows.
fn allocator_panels(html: &str) -> Vec<Panel> {
    let sec = html
        .split(r#"<section id="allocator">"#)
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("allocator section");
    let mut out = vec![];
    for card in sec.split(r#"<div class="card">"#).skip(1) {
        let pid: u64 = card["<h3>PID ".len()..]
            .split(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("PID in the title");
        for panel in card.split(r#"<div class="moment">"#).skip(1) {
            let head = panel.split("</h4>").next().expect("heading");
            let head = head.trim_start_matches("<h4>").to_string();
            let table = panel.split("</table>").next().expect("table");
            let mut readings: Vec<(String, Vec<String>)> = vec![];
            for tr in table.split("<tr").skip(1) {
                if let Some(r) = tr.strip_prefix(r#" class="reading"><th colspan="2">"#) {
                    let r = r.split("</th>").next().expect("reading").to_string();
                    readings.push((r, vec![]));
                } else {
                    let last = readings.last_mut();
                    assert!(last.is_some(), "PID {pid} {head}: a row under no reading");
                    last.expect("reading").1.push(tr.to_string());
                }
            }
            out.push(Panel {
                pid,
                head,
                readings,
            });
        }
    }
    out
}

/// A reading's name and time, without its age: `block map 16:47:24.312`.
fn reading_key(r: &str) -> String {
    let (what, at) = r.split_once(", ").expect("what, when");
    format!("{what} {}", at.get(..12).unwrap_or(at))
}

/// Every allocator panel (a process's worst fragmentation, each OOM) is made of readings
/// that say what they are and when they were taken, to the millisecond and with their age
/// when older than the panel's moment; a reading shown in two panels reads the same in
/// both; an OOM's own reading is the one its alert quotes.
#[test]
fn every_allocator_panel_reads_one_reading_per_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for rec in [
        "tests/corpus4/corpus4.gpumon.jsonl.gz",
        "tests/corpus3/corpus3.jsonl",
        "tests/corpus/corpus_frag.jsonl",
    ] {
        let rec = root.join(rec);
        let alerts: Vec<serde_json::Value> = alert_lines(&rec)
            .iter()
            .map(|l| serde_json::from_str(l).expect("alert"))
            .collect();
        let panels = allocator_panels(&report_html(&rec));
        assert!(!panels.is_empty(), "{}", rec.display());
        let mut seen: std::collections::HashMap<(u64, String), Vec<String>> = Default::default();
        let mut first_oom = std::collections::HashSet::new();
        for p in &panels {
            assert!(
                !p.readings.is_empty(),
                "PID {} {}: no reading",
                p.pid,
                p.head
            );
            for (r, rows) in &p.readings {
                let (_, at) = r.split_once(", ").expect("what, when");
                assert!(
                    at.len() >= "00:00:00.000 UTC".len() && at.as_bytes()[8] == b'.',
                    "PID {} {}: {r}",
                    p.pid,
                    p.head
                );
                if let Some(before) = seen.insert((p.pid, reading_key(r)), rows.clone()) {
                    assert_eq!(&before, rows, "PID {}: {r} reads two ways", p.pid);
                }
                // The first OOM's numbers are the ones its alert quotes.
                if r.starts_with("at the OOM, ") && first_oom.insert(p.pid) {
                    let oom = alerts
                        .iter()
                        .find(|a| {
                            a["pid"] == p.pid
                                && a["change"] == "raised"
                                && matches!(a["kind"].as_str(), Some("oom" | "fragmentation_oom"))
                        })
                        .expect("its OOM alert");
                    for (name, row) in [
                        ("T free in cache", "T free in its cache"),
                        ("L largest hole", "L largest hole"),
                    ] {
                        let Some(b) = oom["evidence"]["values"]
                            .as_array()
                            .expect("values")
                            .iter()
                            .find(|x| x["name"] == name)
                            .and_then(|x| x["bytes"].as_u64())
                        else {
                            continue;
                        };
                        let want = format!("<th>{row}</th><td>{}</td>", gpumon::fmt::human(b));
                        assert!(
                            rows.iter().any(|x| x.contains(&want)),
                            "PID {}: {want} at the OOM: {rows:?}",
                            p.pid
                        );
                    }
                }
            }
        }
    }
}

/// The review's case: the worst block map of the run read 300 ms before the OOM, whose own
/// reading found a smaller hole. Both panels head the same second; each shows the block map
/// with the same numbers, and the OOM panel says it is older than the OOM and gives the
/// OOM's hole beside it, under its own name.
#[test]
fn the_worst_block_map_and_the_oom_after_it_agree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("tests/corpus3/corpus3.jsonl")).expect("rec");
    let event = r#""pid":779,"msg":{"type":"event""#;
    let mut lines = vec![];
    for l in text.lines() {
        if l.contains(event) && l.contains(r#""kind":"oom""#) {
            let v: serde_json::Value = serde_json::from_str(l).expect("frame");
            let t = v["t"].as_i64().expect("t") - 300;
            // 2 GiB free in the cache, the largest hole 640 MiB: the run's worst.
            lines.push(format!(
                r#"{{"type":"companion","t":{t},"pid":779,"msg":{{"type":"frag","t":{t},"dev":0,"free_total":2147483648,"largest_free":671088640,"n_free_blocks":9,"n_segments":4}}}}"#
            ));
        }
        lines.push(l.to_string());
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("worst_then_oom.gpumon.jsonl");
    std::fs::write(&rec, lines.join("\n") + "\n").expect("write");
    let panels: Vec<Panel> = allocator_panels(&report_html(&rec))
        .into_iter()
        .filter(|p| p.pid == 779)
        .collect();
    let worst = panels
        .iter()
        .find(|p| p.head.starts_with("Worst fragmentation"))
        .expect("worst panel");
    let oom = panels
        .iter()
        .find(|p| p.head.starts_with("Just before the OOM"))
        .expect("OOM panel");
    let map = |p: &Panel| {
        p.readings
            .iter()
            .find(|(r, _)| r.starts_with("block map, "))
            .cloned()
            .expect("block map")
    };
    let (w, o) = (map(worst), map(oom));
    assert_eq!(reading_key(&w.0), reading_key(&o.0), "the same block map");
    assert_eq!(w.1, o.1, "read the same in both panels");
    assert!(w.1.iter().any(|r| r.contains("<td>640 MiB</td>")), "{w:?}");
    assert!(o.0.ends_with(", 300 ms before"), "its age: {}", o.0);
    let at_oom = oom
        .readings
        .iter()
        .find(|(r, _)| r.starts_with("at the OOM, "))
        .expect("the OOM's reading");
    assert!(
        at_oom
            .1
            .iter()
            .any(|r| r.contains("L largest hole</th><td>632 MiB")),
        "{at_oom:?}"
    );
}
