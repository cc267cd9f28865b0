//! The alert engine on real H200 runs (the first corpus): every recording of the
//! labelled corpus in `tests/corpus` is replayed through the real pipeline, and the alerts
//! for each scenario's pid (judged only in its own group's recording) are checked against
//! `labels.json` and the ground truth the scenarios wrote (`corpus_truth.jsonl`).
//!
//! Prints the results table that docs/alerts.md quotes ("Quality on real H200 runs").

use crate::support::corpus::{kinds, median};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpumon::model::alerts::AlertConfig;
use gpumon::model::frame::Frame;
use gpumon::record::{Next, Reader};
use serde_json::Value;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// One line of the alert log, stamped with the data time it was written at.
#[derive(Debug, Clone)]
struct Change {
    at: i64,
    change: String,
    kind: String,
    severity: String,
    pid: Option<u32>,
    gpu: u32,
    summary: String,
    message: String,
    evidence: Value,
}

impl Change {
    fn forecast(&self) -> Option<&Value> {
        self.evidence.get("forecast").filter(|f| !f.is_null())
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn f64_of(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn i64_of(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

/// Replays one recording headless, as `gpumon replay --headless --alerts-jsonl -` does.
fn replay(path: &Path, cfg: &AlertConfig) -> Res<Vec<Change>> {
    let mut reader = Reader::open(path)?;
    let (mut pipe, log) = crate::support::corpus::alert_pipeline(cfg.clone());
    pipe.apply(&Frame::Header(reader.header.clone()));
    let mut out = Vec::new();
    while let Next::Frame(f) = reader.next()? {
        pipe.apply(&f);
        let bytes = log.take();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line)?;
            out.push(Change {
                at: pipe.state.now,
                change: str_of(&v, "change"),
                kind: str_of(&v, "kind"),
                severity: str_of(&v, "severity"),
                pid: v.get("pid").and_then(Value::as_u64).map(|p| p as u32),
                gpu: v.get("gpu").and_then(Value::as_u64).unwrap_or(u64::MAX) as u32,
                summary: str_of(&v, "summary"),
                message: str_of(&v, "message"),
                evidence: v.get("evidence").cloned().unwrap_or(Value::Null),
            });
        }
    }
    Ok(out)
}

/// Labels' test-only overrides (keys starting with `_` are documentation).
fn test_config(labels: &Value) -> Res<AlertConfig> {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !k.starts_with('_'))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let cfg = labels.get("test_config").map(strip).unwrap_or(Value::Null);
    Ok(serde_json::from_value(cfg)?)
}

fn truth_lines() -> Res<BTreeMap<String, Value>> {
    let text = std::fs::read_to_string(corpus_dir().join("corpus_truth.jsonl"))?;
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)?;
        if str_of(&v, "type") == "truth" {
            out.insert(str_of(&v, "scenario"), v);
        }
    }
    Ok(out)
}

fn severity_rank(s: &str) -> u8 {
    match s {
        "critical" => 2,
        "warning" => 1,
        _ => 0,
    }
}

fn u64s(v: &Value, k: &str) -> Vec<u64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

fn i64s(v: &Value, k: &str) -> Vec<i64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_i64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// The epoch at which the epoch peak reaches `ceiling`, by the scenario's own formula
/// (`would_die` in scripts/gpu/corpus/scenario.py): nominal leak rate from the measured
/// floor before the onset plus the median transient. With the cap as ceiling this is the
/// truth's `would_die_epoch_peak`; with another ceiling it is when the run would die
/// against that one.
fn would_die_epoch(truth: &Value, ceiling: f64, transient: Option<f64>) -> Option<f64> {
    let onset = usize::try_from(i64_of(truth, "leak_onset_epoch")?).ok()?;
    let rate = f64_of(truth, "leak_bytes_per_epoch")?;
    let floors = u64s(truth, "floors");
    let peaks = u64s(truth, "peaks");
    if onset == 0 || onset > floors.len() || rate <= 0.0 {
        return None;
    }
    let f0 = floors[onset - 1] as f64;
    let mut extra: Vec<f64> = peaks
        .iter()
        .zip(&floors)
        .skip(onset)
        .map(|(p, f)| *p as f64 - *f as f64)
        .collect();
    extra.sort_by(f64::total_cmp);
    let transient = transient.unwrap_or(extra.get(extra.len() / 2).copied().unwrap_or(0.0));
    Some(onset as f64 - 1.0 + (ceiling - f0 - transient) / rate)
}

/// The step's real transient (peak − floor) for a leaking run, from the allocator's own
/// lifetime peak counter in the recording (`peak_allocated`, i.e.
/// `torch.cuda.max_memory_allocated`): median over the leaking epochs at whose end that
/// counter had moved, so it is that epoch's peak. truth.peaks cannot be used for this:
/// scenario.py reads `memory_allocated()` after the forward pass, before the backward adds
/// the logits' gradient (~256 MiB on these BERT runs).
fn measured_transient(recording: &Path, pid: u32, onset: u64) -> Res<Option<f64>> {
    let text = std::fs::read_to_string(recording)?;
    let mut life: Vec<(i64, u64)> = Vec::new();
    let mut floors: Vec<(u64, i64, u64)> = Vec::new();
    for line in text.lines() {
        if !line.contains("\"companion\"") {
            continue;
        }
        let v: Value = serde_json::from_str(line)?;
        if v.get("pid").and_then(Value::as_u64) != Some(u64::from(pid)) {
            continue;
        }
        let Some(m) = v.get("msg") else { continue };
        match str_of(m, "type").as_str() {
            "sample" => {
                if let (Some(t), Some(p)) = (
                    i64_of(m, "t"),
                    m.get("peak_allocated").and_then(Value::as_u64),
                ) {
                    life.push((t, p));
                }
            }
            "epoch" => {
                if let (Some(e), Some(t), Some(f)) = (
                    m.get("epoch").and_then(Value::as_u64),
                    i64_of(m, "t"),
                    m.get("floor").and_then(Value::as_u64),
                ) {
                    floors.push((e, t, f));
                }
            }
            _ => {}
        }
    }
    let peak_at = |t: i64| {
        life.iter()
            .filter(|(st, _)| *st <= t)
            .map(|(_, p)| *p)
            .max()
    };
    let mut extra = Vec::new();
    let mut before = None;
    for (e, t, f) in floors {
        let p = peak_at(t);
        if e >= onset && p > before {
            if let Some(p) = p {
                extra.push(p as f64 - f as f64);
            }
        }
        before = p;
    }
    Ok(median(&extra))
}

/// When the floor reaches `ceiling` for a leak given in bytes per second (markerless).
fn would_die_ms(truth: &Value, ceiling: f64) -> Option<f64> {
    let onset = i64_of(truth, "leak_onset_t_ms")?;
    let rate = f64_of(truth, "leak_bytes_per_s")?;
    let floors = u64s(truth, "floors");
    let times = i64s(truth, "epoch_times");
    let base = floors
        .iter()
        .zip(&times)
        .filter(|(_, t)| **t <= onset)
        .map(|(f, _)| *f)
        .next_back()
        .or(floors.first().copied())? as f64;
    Some(onset as f64 + 1000.0 * (ceiling - base) / rate)
}

/// Leaking epochs the run completed by `t`: the epochs from the onset whose end-of-epoch
/// point existed when the alert was raised (the delay in epochs).
fn epochs_done_since(truth: &Value, onset_epoch: Option<i64>, onset_t: Option<i64>, t: i64) -> i64 {
    i64s(truth, "epoch_times")
        .iter()
        .enumerate()
        .filter(|(e, et)| {
            **et <= t
                && onset_epoch.is_none_or(|o| *e as i64 >= o)
                && onset_t.is_none_or(|o| **et > o)
        })
        .count() as i64
}

#[derive(Default)]
struct Row {
    scenario: String,
    expected: String,
    raised: String,
    timing: String,
    forecast: String,
}

#[derive(Default)]
struct Summary {
    clean_false_alarms: usize,
    clean_runs: usize,
    leak_delays: Vec<f64>,
    frag_leads_s: Vec<f64>,
    forecast_errors: Vec<f64>,
    failures: Vec<String>,
    /// Misses the labels document as known limits (with the looser bound they must keep).
    known_misses: Vec<String>,
}

fn pct(x: f64) -> String {
    format!("{:+.0} %", 100.0 * x)
}

#[test]
fn corpus_alerts_match_labels_and_truth() -> Res<()> {
    let dir = corpus_dir();
    let labels: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("labels.json"))?)?;
    let truth = truth_lines()?;
    let cfg = test_config(&labels)?;
    let gpu = labels.get("gpu").and_then(Value::as_u64).unwrap_or(0) as u32;
    let recs = labels.get("recordings").cloned().unwrap_or(Value::Null);
    let mut by_group: BTreeMap<String, Vec<Change>> = BTreeMap::new();
    for group in ["clean", "leak", "frag"] {
        let file = str_of(&recs, group);
        assert!(!file.is_empty(), "labels name no recording for {group}");
        by_group.insert(group.into(), replay(&dir.join(file), &cfg)?);
    }
    let scenarios = labels
        .get("scenarios")
        .and_then(Value::as_object)
        .ok_or("labels.scenarios")?;
    let mut rows = Vec::new();
    let mut sum = Summary::default();
    for (name, sc) in scenarios {
        let t = truth
            .get(name)
            .ok_or_else(|| format!("no truth for {name}"))?;
        let group = str_of(sc, "group");
        assert_eq!(str_of(t, "group"), group, "{name}: group");
        let pid = i64_of(t, "pid").ok_or("pid")? as u32;
        let changes: Vec<&Change> = by_group
            .get(&group)
            .ok_or("group")?
            .iter()
            .filter(|c| c.pid == Some(pid))
            .collect();
        if std::env::var_os("GPUMON_CORPUS_DEBUG").is_some() {
            for c in &changes {
                eprintln!(
                    "{name} {} {} {} {} {} {}",
                    c.at, c.change, c.kind, c.summary, c.message, c.evidence
                );
            }
        }
        let raised: Vec<&Change> = changes
            .iter()
            .copied()
            .filter(|c| c.change == "raised")
            .collect();
        let expects = sc
            .get("expect")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut allowed: Vec<String> = kinds(sc.get("allow").unwrap_or(&Value::Null));
        for e in &expects {
            allowed.extend(kinds(e.get("kind").unwrap_or(&Value::Null)));
        }
        let mut failures = Vec::new();
        let mut known_misses = Vec::new();
        let mut fail = |msg: String| failures.push(format!("{name}: {msg}"));
        let mut row = Row {
            scenario: name.clone(),
            expected: if expects.is_empty() {
                "nothing".into()
            } else {
                expects
                    .iter()
                    .map(|e| kinds(e.get("kind").unwrap_or(&Value::Null)).join("|"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            raised: if raised.is_empty() {
                "nothing".into()
            } else {
                raised
                    .iter()
                    .map(|c| format!("{} ({})", c.kind, c.severity))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            ..Row::default()
        };
        for c in &raised {
            assert_eq!(c.gpu, gpu, "{name}: alert on the wrong GPU: {}", c.summary);
        }
        let unexpected: Vec<&&Change> = raised
            .iter()
            .filter(|c| !allowed.contains(&c.kind))
            .collect();
        for c in &unexpected {
            fail(format!(
                "false alarm {} {}: {}",
                c.kind, c.severity, c.message
            ));
        }
        if group == "clean" {
            sum.clean_runs += 1;
            // An expected event (a real OOM) is a report, not an alarm.
            sum.clean_false_alarms += unexpected
                .iter()
                .filter(|c| severity_rank(&c.severity) >= 1)
                .count();
        }
        let mut timing = Vec::new();
        let mut fc_notes = Vec::new();
        for e in &expects {
            let kinds = kinds(e.get("kind").unwrap_or(&Value::Null));
            let first = raised.iter().find(|c| kinds.contains(&c.kind));
            let Some(first) = first else {
                fail(format!("expected {} was not raised", kinds.join("|")));
                continue;
            };
            if let Some(sev) = e.get("severity").and_then(Value::as_str) {
                if first.severity != sev {
                    fail(format!(
                        "{} raised as {}, expected {sev}",
                        first.kind, first.severity
                    ));
                }
            }
            if let Some(words) = e.get("message_says").and_then(Value::as_array) {
                for w in words.iter().filter_map(Value::as_str) {
                    if !first.message.contains(w) {
                        fail(format!(
                            "{} message lacks {w:?}: {}",
                            first.kind, first.message
                        ));
                    }
                }
            }
            match first.kind.as_str() {
                "growth" => {
                    let onset_epoch = i64_of(e, "onset_epoch");
                    let onset_t = i64_of(e, "onset_t_ms");
                    if let Some(o) = onset_epoch {
                        assert_eq!(Some(o), i64_of(t, "leak_onset_epoch"), "{name}: onset");
                    }
                    if let Some(o) = onset_t {
                        assert_eq!(Some(o), i64_of(t, "leak_onset_t_ms"), "{name}: onset");
                    }
                    let delay = epochs_done_since(t, onset_epoch, onset_t, first.at);
                    if onset_epoch.is_some() {
                        let within = i64_of(e, "detect_within_epochs").unwrap_or(8);
                        sum.leak_delays.push(delay as f64);
                        timing.push(format!("leak flagged after {delay} epochs"));
                        if delay > within {
                            fail(format!("leak flagged after {delay} epochs (> {within})"));
                        }
                    } else if let Some(o) = onset_t {
                        // Without markers the run's own (unmarked) epochs still count.
                        timing.push(format!(
                            "leak flagged {:.0} s ({delay} unmarked epochs) after onset",
                            (first.at - o) as f64 / 1000.0
                        ));
                    }
                    if let Some(s) = i64_of(e, "detect_within_s") {
                        let o = onset_t.ok_or("detect_within_s needs onset_t_ms")?;
                        if first.at - o > s * 1000 {
                            let msg = format!(
                                "leak flagged {:.0} s after onset (> {s})",
                                (first.at - o) as f64 / 1000.0
                            );
                            let known = e
                                .get("known_limit")
                                .and_then(|k| i64_of(k, "detect_within_s"));
                            match known {
                                Some(k) if first.at - o <= k * 1000 => known_misses.push(msg),
                                _ => fail(msg),
                            }
                        }
                    }
                    let Some(fe) = e.get("forecast").filter(|f| !f.is_null()) else {
                        fc_notes.push("not checked (shared ceiling)".to_string());
                        continue;
                    };
                    let tol = f64_of(fe, "tolerance").unwrap_or(0.25);
                    let transient = match onset_epoch {
                        Some(o) => {
                            measured_transient(&dir.join(str_of(&recs, &group)), pid, o as u64)?
                        }
                        None => None,
                    };
                    // The forecast the user sees at the raise, and the last one before the
                    // run ended: both must be right against the ceiling they name.
                    let growth: Vec<&&Change> = changes
                        .iter()
                        .filter(|c| c.kind == "growth" && c.forecast().is_some())
                        .collect();
                    let picks = [growth.first(), growth.last()];
                    for (which, c) in ["raise", "last"].iter().zip(picks) {
                        let Some(c) = c else { continue };
                        let Some(f) = c.forecast() else { continue };
                        let ceiling = f64_of(f, "ceiling").ok_or("ceiling")?;
                        let src = str_of(f, "ceiling_source");
                        let (err, shown) = if let Some(at) = f64_of(f, "at_epoch") {
                            let target =
                                would_die_epoch(t, ceiling, transient).ok_or("would_die")?;
                            let err = (at - target) / target;
                            (
                                err,
                                format!("{which}: ep {at:.0} vs {target:.0} ({})", pct(err)),
                            )
                        } else {
                            let ms = f64_of(f, "ms").ok_or("forecast ms")?;
                            let at = c.at as f64 + ms;
                            let target = would_die_ms(t, ceiling).ok_or("would_die_ms")?;
                            let o = onset_t.ok_or("onset_t_ms")? as f64;
                            // Relative to the time the leak takes from its onset.
                            let err = (at - target) / (target - o);
                            (
                                err,
                                format!(
                                    "{which}: +{:.0} s vs +{:.0} s after onset ({})",
                                    (at - o) / 1000.0,
                                    (target - o) / 1000.0,
                                    pct(err)
                                ),
                            )
                        };
                        fc_notes.push(format!(
                            "{shown} [{src} {:.2} GiB]",
                            ceiling / (1u64 << 30) as f64
                        ));
                        sum.forecast_errors.push(err.abs());
                        if err.abs() > tol {
                            let msg =
                                format!("{which} forecast off by {} (> {tol}): {shown}", pct(err));
                            let known = fe
                                .get("known_limit")
                                .and_then(|k| f64_of(k, &format!("{which}_tolerance")));
                            match known {
                                Some(k) if err.abs() <= k => known_misses.push(msg),
                                _ => fail(msg),
                            }
                        }
                    }
                    if let Some(target) = f64_of(fe, "cap_would_die_epoch") {
                        assert_eq!(Some(target), f64_of(t, "would_die_epoch_peak"), "{name}");
                        // The helper reproduces the truth's own number at the cap.
                        let cap = f64_of(t, "cap_bytes").ok_or("cap_bytes")?;
                        let mine = would_die_epoch(t, cap, None).ok_or("would_die")?;
                        assert!((mine - target).abs() < 0.01, "{name}: {mine} vs {target}");
                    }
                    if let Some(target) = i64_of(fe, "cap_would_die_t_ms") {
                        assert_eq!(Some(target), i64_of(t, "would_die_t_ms"), "{name}");
                        let cap = f64_of(t, "cap_bytes").ok_or("cap_bytes")?;
                        let mine = would_die_ms(t, cap).ok_or("would_die_ms")?;
                        assert!(
                            (mine - target as f64).abs() < 2.0,
                            "{name}: {mine} vs {target}"
                        );
                    }
                }
                "oom" | "fragmentation_oom" => {
                    let oom_t = i64_of(t, "oom_t_ms").ok_or("truth has no oom_t_ms")?;
                    assert_eq!(i64_of(e, "at_t_ms"), Some(oom_t), "{name}: label oom time");
                    let off = first.at - oom_t;
                    timing.push(format!(
                        "{} at OOM {:+.1} s",
                        first.kind,
                        off as f64 / 1000.0
                    ));
                    if !(-1000..=5000).contains(&off) {
                        fail(format!("{} raised {off} ms from the OOM", first.kind));
                    }
                }
                "fragmentation_risk" => {
                    let oom_t = i64_of(t, "oom_t_ms").ok_or("truth has no oom_t_ms")?;
                    assert_eq!(
                        i64_of(e, "before_t_ms"),
                        Some(oom_t),
                        "{name}: label oom time"
                    );
                    let lead = (oom_t - first.at) as f64 / 1000.0;
                    sum.frag_leads_s.push(lead);
                    timing.push(format!("risk {lead:.1} s before the OOM"));
                    if lead <= 0.0 {
                        fail(format!(
                            "fragmentation risk raised {:.1} s after the OOM",
                            -lead
                        ));
                    }
                    if let Some(from) = i64_of(e, "condition_from_t_ms") {
                        assert_eq!(Some(from), i64_of(t, "frag_t_ms"), "{name}: frag time");
                        if first.at < from {
                            fail("risk raised before the cache was fragmented".into());
                        }
                    }
                }
                "grab_all" => {
                    let from = i64_of(e, "from_t_ms").ok_or("from_t_ms")?;
                    let until = i64_of(e, "until_t_ms").ok_or("until_t_ms")?;
                    let persist = cfg.grab_all.persist_ms;
                    assert_eq!(Some(from), i64_of(t, "grab_t_ms").map(|g| g + persist));
                    assert_eq!(Some(until), i64_of(t, "grab_end_t_ms"));
                    timing.push(format!(
                        "{:.0} s after the grab",
                        (first.at - (from - persist)) as f64 / 1000.0
                    ));
                    if first.at < from || first.at > until {
                        fail(format!(
                            "grab_all at {} outside [{from}, {until}]",
                            first.at
                        ));
                    }
                }
                _ => {}
            }
        }
        sum.failures.extend(failures);
        sum.known_misses
            .extend(known_misses.into_iter().map(|m| format!("{name}: {m}")));
        row.timing = timing.join("; ");
        row.forecast = fc_notes.join("; ");
        rows.push(row);
    }

    println!(
        "\n| scenario | expected | raised | delay / lead | forecast (epoch or time the run would die at the named ceiling) |"
    );
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.scenario,
            r.expected,
            r.raised,
            if r.timing.is_empty() {
                "–"
            } else {
                &r.timing
            },
            if r.forecast.is_empty() {
                "–"
            } else {
                &r.forecast
            }
        );
    }
    let med = median(&sum.leak_delays);
    let worst = sum.leak_delays.iter().copied().fold(f64::NAN, f64::max);
    let worst_fc = sum.forecast_errors.iter().copied().fold(f64::NAN, f64::max);
    println!(
        "\nfalse alarms on clean runs: {} of {} runs; leaks with epoch markers flagged: {} (delay median {} epochs, worst {worst}); fragmentation-OOM lead: {:?} s; forecast error: median {}, worst {}",
        sum.clean_false_alarms,
        sum.clean_runs,
        sum.leak_delays.len(),
        med.map_or("–".into(), |m| format!("{m}")),
        sum.frag_leads_s,
        median(&sum.forecast_errors).map_or("–".into(), pct),
        if worst_fc.is_nan() {
            "–".into()
        } else {
            pct(worst_fc)
        },
    );
    for m in &sum.known_misses {
        println!("known miss (labels: known_limit): {m}");
    }
    assert!(
        sum.failures.is_empty(),
        "{} failures:\n{}",
        sum.failures.len(),
        sum.failures.join("\n")
    );
    Ok(())
}
