//! The report in a real browser: headless Chromium renders the page of each bundled
//! recording to PNG (desktop and laptop widths) and the test checks what the browser saw:
//! no console message at all (a bad SVG path, a CSP violation or a failed load each print
//! one), every chart drew its data, and the summary as rendered names each alert the
//! replay raised. A negative control proves the console check can fail.
//!
//! Requires Chromium (CI installs Debian's `chromium`); GPUMON_REQUIRE_CHROMIUM=1 makes its
//! absence a failure instead of a skip. GPUMON_REPORT_PNG_DIR=DIR keeps the PNGs there.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::report::{alert_lines, named, raised, recordings};
use crate::support::gpumon;

const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
];

/// Paths that draw data (not grid, axes, or reference lines).
const DATA_CLASSES: &str =
    "used nvml resv alloc floor peak evpt fit forecast bar p0 p1 p2 p3 p4 p5 p6 p7";

pub(crate) fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() && std::env::var_os("GPUMON_REQUIRE_CHROMIUM").is_some_and(|v| v == "1") {
        panic!("chromium is required (GPUMON_REQUIRE_CHROMIUM=1) but not installed");
    }
    found
}

/// Run the browser on `page` with a fresh profile; its console messages (the text between
/// the quotes of each `CONSOLE` log line).
pub(crate) fn render(bin: &str, page: &Path, width: u32, height: u32, png: &Path) -> Vec<String> {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new("timeout")
        .args(["120", bin])
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {err}");
    let bytes = std::fs::read(png).unwrap_or_else(|_| panic!("no screenshot: {err}"));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 20_000,
        "an empty-looking screenshot: {} bytes",
        bytes.len()
    );
    console(&err)
}

fn console(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once(":CONSOLE").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once("] ").map(|(_, m)| m.to_string()))
        .map(|m| {
            let m = m.strip_prefix('"').unwrap_or(&m).to_string();
            match m.rfind("\", source: ") {
                Some(i) => m[..i].to_string(),
                None => m,
            }
        })
        .collect()
}

/// The page with a probe appended: for every chart, how many data paths have a length or
/// an area in the layout, and the summary's rendered text. The copy's CSP lets the probe
/// run; the page itself stays script-free.
pub(crate) fn probed(html: &str) -> String {
    let probe = format!(
        r##"<script>(function(){{
const data = new Set("{DATA_CLASSES}".split(" "));
const charts = Array.from(document.querySelectorAll("svg.chart"));
for (const s of charts) {{
  let n = 0;
  for (const p of s.querySelectorAll("path")) {{
    if (!Array.from(p.classList).some(c => data.has(c))) continue;
    const b = p.getBBox();
    if (p.getTotalLength() > 0 && (b.width > 0 || b.height > 0)) n++;
  }}
  console.log("GPUMON_CHART " + s.id + " " + n + " " + Math.round(s.getBoundingClientRect().width));
}}
console.log("GPUMON_CHARTS " + charts.length);
for (const s of charts) {{
  const ts = Array.from(s.querySelectorAll("text")).map(t => [t.textContent, t.getBoundingClientRect()]);
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {{
    const a = ts[i][1], b = ts[j][1];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 1) console.log("GPUMON_OVERLAP " + s.id + " [" + ts[i][0] + "] over [" + ts[j][0] + "]");
  }}
}}
for (const s of document.querySelectorAll("svg.chart[id^='gpu-']")) {{
  const ys = Array.from(s.querySelectorAll("text.ylab")).map(t => parseFloat(t.getAttribute("y")));
  let top = Infinity;
  for (const p of s.querySelectorAll("path.used, path.p0, path.p1, path.p2, path.p3, path.p4, path.p5, path.p6, path.p7")) {{
    if (p.getTotalLength() > 0) top = Math.min(top, p.getBBox().y);
  }}
  const zero = Math.max(...ys) - 4, axis = Math.min(...ys) - 4;
  console.log("GPUMON_RANGE " + s.id + " " + ((zero - top) / (zero - axis)).toFixed(3));
}}
console.log("GPUMON_SUMMARY " + document.getElementById("summary").innerText.replace(/\s+/g, " "));
for (const li of document.querySelectorAll("#summary li[data-alert]")) {{
  console.log("GPUMON_ITEM " + li.innerText.replace(/\s+/g, " "));
}}
}})();</script></body>"##
    );
    html.replace("script-src 'none'", "")
        .replace(
            "default-src 'none';",
            "default-src 'none'; script-src 'unsafe-inline';",
        )
        .replace("</body>", &probe)
}

fn keep(png: &Path, name: &str) {
    if let Some(dir) = std::env::var_os("GPUMON_REPORT_PNG_DIR") {
        let _ = std::fs::copy(png, PathBuf::from(dir).join(name));
    }
}

#[test]
fn the_console_check_catches_a_broken_page() {
    let Some(bin) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("broken.html");
    // A bad path and a console error: both must be seen, or the real check proves nothing.
    let filler = "<p>filler</p>".repeat(400);
    std::fs::write(
        &page,
        format!(
            r#"<!DOCTYPE html><html><body><svg><path d="M0 0 Lx"/></svg>{filler}<script>console.error("boom")</script></body></html>"#
        ),
    )
    .expect("write");
    let msgs = render(bin, &page, 800, 2000, &dir.path().join("b.png"));
    assert!(msgs.iter().any(|m| m.contains("attribute d")), "{msgs:?}");
    assert!(msgs.iter().any(|m| m == "boom"), "{msgs:?}");
}

#[test]
fn every_bundled_report_renders_cleanly_in_chromium() {
    let Some(bin) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    for rec in recordings() {
        let name = rec
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".gpumon.jsonl.gz"))
            .expect("name")
            .to_string();
        let page = dir.path().join(format!("{name}.html"));
        gpumon()
            .arg("report")
            .arg(&rec)
            .arg("-o")
            .arg(&page)
            .assert()
            .success();
        // Desktop: the page as written, not a single console message.
        let png = dir.path().join(format!("{name}-1400.png"));
        let msgs = render(bin, &page, 1400, 2400, &png);
        assert!(msgs.is_empty(), "{name}: console said {msgs:?}");
        keep(&png, &format!("{name}-1400.png"));

        // Laptop: the probed copy reports what the layout drew.
        let html = std::fs::read_to_string(&page).expect("page");
        let probe_page = dir.path().join(format!("{name}-probed.html"));
        std::fs::write(&probe_page, probed(&html)).expect("write");
        let png = dir.path().join(format!("{name}-1000.png"));
        let msgs = render(bin, &probe_page, 1000, 2400, &png);
        keep(&png, &format!("{name}-1000.png"));
        let stray: Vec<_> = msgs.iter().filter(|m| !m.starts_with("GPUMON_")).collect();
        assert!(stray.is_empty(), "{name}: console said {stray:?}");
        let expected = html.matches("<svg class=\"chart").count();
        let count: usize = msgs
            .iter()
            .find_map(|m| m.strip_prefix("GPUMON_CHARTS "))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: the probe did not run: {msgs:?}"));
        assert_eq!(count, expected, "{name}: charts in the DOM");
        let over: Vec<_> = msgs
            .iter()
            .filter(|m| m.starts_with("GPUMON_OVERLAP "))
            .collect();
        assert!(
            over.is_empty(),
            "{name}: labels printed over labels: {over:?}"
        );
        assert!(
            count >= 2,
            "{name}: a GPU chart and a process chart at least"
        );
        // The GPU charts are scaled to their data: its peak reaches at least half the
        // byte axis (the card's 141 GiB scale left 2-14 GiB processes as flat lines).
        let ranges: Vec<&str> = msgs
            .iter()
            .filter_map(|m| m.strip_prefix("GPUMON_RANGE "))
            .collect();
        assert!(!ranges.is_empty(), "{name}: no GPU chart measured");
        for r in ranges {
            let (id, frac) = r.split_once(' ').expect("id and share");
            let frac: f64 = frac.parse().expect("a number");
            assert!(
                (0.5..=1.05).contains(&frac),
                "{name}: chart {id}'s data reaches {frac} of its axis"
            );
        }
        for m in msgs.iter().filter_map(|m| m.strip_prefix("GPUMON_CHART ")) {
            let f: Vec<&str> = m.split(' ').collect();
            let (id, drawn, width) = (f[0], f[1].parse::<u32>(), f[2].parse::<u32>());
            assert!(
                drawn.is_ok_and(|n| n >= 1),
                "{name}: chart {id} drew no data: {m}"
            );
            assert!(
                width.is_ok_and(|w| w >= 300),
                "{name}: chart {id} squeezed: {m}"
            );
        }
        let summary = msgs
            .iter()
            .find_map(|m| m.strip_prefix("GPUMON_SUMMARY "))
            .expect("summary text");
        let items: Vec<&str> = msgs
            .iter()
            .filter_map(|m| m.strip_prefix("GPUMON_ITEM "))
            .collect();
        let keys = raised(&alert_lines(&rec));
        assert_eq!(
            items.len(),
            keys.len(),
            "{name}: one rendered item per alert: {items:?}"
        );
        if keys.is_empty() {
            assert!(summary.contains("No alert"), "{name}: {summary}");
        }
        for key in keys {
            let hit = items.iter().any(|i| named(i, key));
            assert!(hit, "{name}: no rendered item names {key:?}: {items:?}");
        }
    }
}

/// At laptop width, on the recordings with the most alerts at once (a burst of OOMs, ranks
/// raised together, a process with two forecasts), no text of a chart is printed over
/// another: bursts share a label, a label with no free spot is left out and said under the
/// chart, and the probe's overlap check saw these pages overprint before.
#[test]
fn no_chart_label_is_printed_over_another_at_laptop_width() {
    let Some(bin) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for rec in [
        "tests/corpus3/corpus3.jsonl",
        "tests/corpus4/corpus4.gpumon.jsonl.gz",
        "tests/corpus_jobs/jobs.gpumon.jsonl.gz",
    ] {
        let name = rec.rsplit('/').next().expect("name");
        let page = dir.path().join(format!("{name}.html"));
        gpumon()
            .arg("report")
            .arg(root.join(rec))
            .arg("-o")
            .arg(&page)
            .assert()
            .success();
        let html = std::fs::read_to_string(&page).expect("page");
        let probe_page = dir.path().join(format!("{name}-probed.html"));
        std::fs::write(&probe_page, probed(&html)).expect("write");
        let png = dir.path().join(format!("{name}-1000.png"));
        let msgs = render(bin, &probe_page, 1000, 2400, &png);
        keep(&png, &format!("{name}-1000.png"));
        assert!(
            msgs.iter().any(|m| m.starts_with("GPUMON_CHARTS ")),
            "{name}: the probe did not run: {msgs:?}"
        );
        let over: Vec<_> = msgs
            .iter()
            .filter(|m| m.starts_with("GPUMON_OVERLAP "))
            .collect();
        assert!(
            over.is_empty(),
            "{name}: labels printed over labels: {over:?}"
        );
    }
}
