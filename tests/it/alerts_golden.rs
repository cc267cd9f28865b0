//! The alert engine's outcome, byte for byte: every bundled recording (the demos in
//! `assets/`, the labelled corpora, the H200 fixtures) replayed through the real pipeline
//! with the default thresholds, its `--alerts-jsonl` lines compared with the ones stored in
//! `tests/it/golden/alerts/`. The quality tests judge whether alerts are right; this one says
//! whether a change to how the engine is run (when it evaluates, what it caches) changed
//! any of them, down to a forecast's last digit. A rule change that is meant to change them
//! rewrites the files: `GPUMON_BLESS=1 cargo test --test it alerts_golden::`, and the diff
//! goes in its commit.

use std::path::{Path, PathBuf};

use gpumon::model::frame::Frame;
use gpumon::record::{Next, Reader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every bundled file that is a recording (a header first), not a label or truth file.
fn recordings() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [
        "assets",
        "tests/corpus",
        "tests/corpus2",
        "tests/corpus3",
        "tests/fixtures",
    ] {
        for e in std::fs::read_dir(root().join(dir))
            .expect("bundled dir")
            .flatten()
        {
            let p = e.path();
            let name = p.to_string_lossy();
            // The bundled demos are stored gzipped.
            let is_jsonl = name.ends_with(".jsonl") || name.ends_with(".jsonl.gz");
            let first = if is_jsonl {
                crate::support::read_text(&p)
                    .lines()
                    .next()
                    .map(str::to_string)
                    .unwrap_or_default()
            } else {
                String::new()
            };
            if is_jsonl && first.contains(r#""type":"header""#) {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() >= 10, "the bundled recordings: {v:?}");
    let demos = v
        .iter()
        .filter(|p| p.starts_with(root().join("assets")))
        .count();
    assert_eq!(demos, 4, "every bundled demo is compared: {v:?}");
    v
}

/// The alert log of `path`, as `gpumon replay --headless --alerts-jsonl -` writes it.
fn alert_log(path: &Path) -> String {
    let mut reader = Reader::open(path).expect("a recording");
    let (mut pipe, log) =
        crate::support::corpus::alert_pipeline(gpumon::model::alerts::AlertConfig::default());
    pipe.apply(&Frame::Header(reader.header.clone()));
    while let Next::Frame(f) = reader.next().expect("readable") {
        pipe.apply(&f);
    }
    drop(pipe);
    String::from_utf8(log.take()).expect("utf-8")
}

fn golden_name(path: &Path) -> String {
    let rel = path.strip_prefix(root()).expect("inside the repository");
    let s = rel.to_string_lossy().replace('/', "__");
    let s = s.strip_suffix(".gz").unwrap_or(&s);
    format!("{}.alerts.jsonl", s.trim_end_matches(".jsonl"))
}

#[test]
fn every_bundled_recording_raises_the_stored_alerts() {
    let dir = root().join("tests/it/golden/alerts");
    let bless = std::env::var_os("GPUMON_BLESS").is_some();
    let mut differ = Vec::new();
    let mut raised = 0;
    for rec in recordings() {
        let got = alert_log(&rec);
        raised += got
            .lines()
            .filter(|l| l.contains(r#""change":"raised""#))
            .count();
        let file = dir.join(golden_name(&rec));
        if bless {
            std::fs::create_dir_all(&dir).expect("golden dir");
            std::fs::write(&file, &got).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&file).unwrap_or_default();
        if got != want {
            let at = got
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(got.lines().count().min(want.lines().count()));
            differ.push(format!(
                "{}: {} lines, stored {}; first difference at line {}:\n  got  {}\n  want {}",
                rec.display(),
                got.lines().count(),
                want.lines().count(),
                at + 1,
                got.lines().nth(at).unwrap_or("(none)"),
                want.lines().nth(at).unwrap_or("(none)"),
            ));
        }
    }
    // The recordings are chosen for their alerts: a run that raises none compares nothing.
    assert!(
        raised >= 20,
        "only {raised} alerts raised over the recordings"
    );
    assert!(
        differ.is_empty(),
        "alert changes differ from tests/it/golden/alerts (GPUMON_BLESS=1 rewrites them when \
         meant):\n{}",
        differ.join("\n")
    );
}
