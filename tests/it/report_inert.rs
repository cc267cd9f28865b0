//! What a recording says is told, never rendered: a command
//! line `x ![ok](https://evil.example/all-green.png)`, a host or a GPU name with a link
//! or an image reached the Markdown report as is, and a PR or CI summary showed the
//! attacker's image. Both formats of the report are made from one hostile recording.

use std::io::Write;

use crate::support::gpumon;

const PAYLOAD: &str = "x ![ok](https://evil.example/all-green.png) [t](javascript:alert(1)) <img src=x onerror=alert(1)> www.evil.example";

fn recording(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("hostile.gpumon.jsonl");
    let esc = |s: &str| serde_json::to_string(s).expect("json");
    let mut f = std::fs::File::create(&p).expect("create");
    let start = 1_796_048_097_593i64;
    writeln!(
        f,
        r#"{{"type":"header","v":1,"format":"gpumon","host":{h},"started":{start},"interval_ms":1000,"gpus":[{{"index":0,"name":{h},"uuid":"GPU-0","pci_bus_id":"0:0","memory_total":150754820096}}],"gpumon_version":"0.1.0"}}"#,
        h = esc(PAYLOAD)
    )
    .expect("write");
    for i in 0..5i64 {
        writeln!(
            f,
            r#"{{"type":"tick","t":{},"gpus":[{{"index":0,"mem":{{"total":150754820096,"used":1073741824,"free":149681078272,"reserved":1}},"procs":[{{"pid":600,"used":1073741824}}]}}]}}"#,
            start + i * 1000
        )
        .expect("write");
    }
    writeln!(
        f,
        r#"{{"type":"procs","t":{start},"procs":[{{"pid":600,"user":"u","name":"python3","cmdline":{}}}]}}"#,
        esc(PAYLOAD)
    )
    .expect("write");
    p
}

/// The first place a Markdown renderer could make a link, image or tag of: an unescaped
/// `[`, `]`, `<`, `!`, `://`, `www.` or `@`.
fn live_markup(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let escaped = |i: usize| b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1;
    (0..b.len()).find(|&i| {
        let live = matches!(b[i], b'[' | b']' | b'<' | b'!' | b'@')
            || b[i..].starts_with(b"://")
            || (b[i] == b'.' && i >= 3 && b[i - 3..i].eq_ignore_ascii_case(b"www"));
        live && !escaped(i)
    })
}

#[test]
fn links_and_images_in_a_recording_stay_text_in_markdown_and_html() {
    let d = tempfile::tempdir().expect("dir");
    let rec = recording(d.path());
    let o = gpumon()
        .arg("report")
        .arg(&rec)
        .args(["--format", "md"])
        .output()
        .expect("md");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8(o.stdout).expect("utf-8");
    // Every line that quotes the payload: the overview (host), the GPU and process tables.
    let quoting: Vec<&str> = md.lines().filter(|l| l.contains("evil")).collect();
    assert!(quoting.len() >= 3, "the payload is quoted:\n{md}");
    for l in quoting {
        // Table pipes and the page's own `**` are gpumon's; the rest is the recording's.
        let at = live_markup(l);
        assert_eq!(at, None, "live markup at {at:?} in: {l}");
    }
    let out = d.path().join("r.html");
    let o = gpumon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("html");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).expect("page");
    assert!(html.contains("evil.example"), "the payload is quoted");
    for tag in ["<img", "<a ", "<a>", "href="] {
        assert!(!html.contains(tag), "{tag} in the page");
    }
}
