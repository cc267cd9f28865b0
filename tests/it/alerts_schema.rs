//! `--alerts-jsonl` output and its documentation agree: every line the
//! real binary writes while replaying a recording validates against
//! `docs/alerts.schema.json`, and so does the example line in `docs/alerts.md`.
//!
//! The validator is written here rather than taken from the `jsonschema` crate: the schema
//! uses ten keywords (type, enum, required, properties, additionalProperties, items,
//! minimum, maximum, minLength, maxLength), each a few lines, while the crate brings some
//! forty dependencies (regex engines, URL and format support) into every build of this
//! project on a two-core CI machine. A test below proves the validator rejects bad lines.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("docs/alerts.schema.json")).expect("schema");
    serde_json::from_str(&text).expect("schema is JSON")
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// The errors of `v` against `s`, each with its JSON path.
fn validate(s: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)),
            _ => true,
        };
        if !ok {
            errs.push(format!("{path}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(v)
    {
        errs.push(format!("{path}: {v} is not one of {allowed:?}"));
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            errs.push(format!("{path}: {n} below the minimum"));
        }
        if s.get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            errs.push(format!("{path}: {n} above the maximum"));
        }
    }
    if let Some(text) = v.as_str() {
        let n = text.chars().count() as u64;
        if s.get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            errs.push(format!(
                "{path}: {n} characters, at most {:?}",
                s["maxLength"]
            ));
        }
        if s.get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            errs.push(format!(
                "{path}: {n} characters, at least {:?}",
                s["minLength"]
            ));
        }
    }
    if let Value::Object(obj) = v {
        let props = s.get("properties").and_then(Value::as_object);
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(r) = r.as_str()
                && !obj.contains_key(r)
            {
                errs.push(format!("{path}: missing {r}"));
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(ps, x, &format!("{path}.{k}"), errs),
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errs.push(format!("{path}: unexpected field {k}"));
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(is)) = (v, s.get("items")) {
        for (i, x) in items.iter().enumerate() {
            validate(is, x, &format!("{path}[{i}]"), errs);
        }
    }
}

fn errors(line: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    validate(&schema(), line, "$", &mut errs);
    errs
}

fn replay_lines(recording: &str) -> Vec<Value> {
    let out = Command::cargo_bin("gpumon")
        .expect("binary")
        .args(["replay", recording, "--headless", "--alerts-jsonl", "-"])
        .current_dir(root())
        .output()
        .expect("gpumon replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

#[test]
fn real_output_validates_against_the_schema() {
    let mut lines = replay_lines("tests/corpus2/corpus2_frag.jsonl");
    lines.extend(replay_lines("tests/corpus/corpus_frag.jsonl"));
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["kind"].as_str()).collect();
    for k in [
        "growth",
        "fragmentation_risk",
        "fragmentation_oom",
        "grab_all",
    ] {
        assert!(kinds.contains(&k), "the replays raise {k}: {kinds:?}");
    }
    let changes: Vec<&str> = lines.iter().filter_map(|l| l["change"].as_str()).collect();
    assert!(
        changes.contains(&"raised") && changes.contains(&"cleared"),
        "{changes:?}"
    );
    for l in &lines {
        let errs = errors(l);
        assert!(errs.is_empty(), "{errs:?}\n{l}");
    }
}

#[test]
fn the_documented_example_is_a_valid_line() {
    let doc = std::fs::read_to_string(root().join("docs/alerts.md")).expect("docs");
    let example = doc
        .lines()
        .skip_while(|l| !l.contains("<!-- alerts-jsonl example -->"))
        .find(|l| l.trim_start().starts_with('{'))
        .expect("docs/alerts.md holds an example line after the marker");
    let v: Value = serde_json::from_str(example.trim()).expect("the example is JSON");
    let errs = errors(&v);
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let good: Value = serde_json::json!({
        "time": "2026-11-30T14:15:27.182Z", "change": "raised", "epoch": 9,
        "kind": "fragmentation_risk", "severity": "warning", "pid": 596, "gpu": 0,
        "summary": "596@0 frag: 224MiB fits no hole", "message": "m",
        "evidence": {"basis": "allocator", "values": [{"name": "T", "bytes": 1}]}
    });
    assert!(errors(&good).is_empty(), "{:?}", errors(&good));
    let mut bad = good.clone();
    bad["severity"] = "loud".into();
    bad["extra"] = 1.into();
    bad["summary"] = "x".repeat(39).into();
    bad["evidence"]["values"][0]["bytes"] = (-1).into();
    bad.as_object_mut().map(|o| o.remove("gpu"));
    let errs = errors(&bad);
    for want in ["severity", "extra", "summary", "bytes", "missing gpu"] {
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "{want} not caught: {errs:?}"
        );
    }
}

/// Every alert change recorded in the bundled recordings and corpora, as the recorder wrote it.
fn recorded_changes() -> Vec<gpumon::model::alerts::AlertChange> {
    use gpumon::model::frame::Frame;
    use gpumon::record::{Next, Reader};
    let mut files = Vec::new();
    for dir in ["assets", "tests/corpus", "tests/corpus2", "tests/corpus3"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.to_string_lossy().into_owned();
            if name.ends_with(".jsonl") || name.ends_with(".jsonl.gz") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let Ok(mut r) = Reader::open(&p) else {
            continue; // not a recording (labels, truth tables)
        };
        while let Ok(Next::Frame(f)) = r.next() {
            if let Frame::Alert(c) = f {
                out.push(*c);
            }
        }
    }
    out
}

/// The line is serialised from `AlertLine` (src/export/alert_line.rs), byte for byte what
/// the hand-built `json!` object it replaced wrote, over every recorded alert change.
#[test]
fn the_line_is_what_it_was_byte_for_byte() {
    use gpumon::export::alert_line::AlertLine;
    let changes = recorded_changes();
    assert!(changes.len() > 50, "recorded changes: {}", changes.len());
    for c in &changes {
        let before = serde_json::json!({
            "time": gpumon::model::time::rfc3339(c.at),
            "change": c.change,
            "epoch": c.alert.raised_epoch,
            "kind": c.alert.kind,
            "severity": c.alert.severity,
            "pid": c.alert.pid,
            "gpu": c.alert.gpu,
            "summary": c.alert.summary,
            "message": c.alert.message,
            "evidence": c.alert.evidence,
        });
        assert_eq!(AlertLine::of(c).to_line(), format!("{before}\n"));
    }
}

/// The schema's fields are the line's: docs/alerts.schema.json names every field
/// `AlertLine` writes, requires all of them, and allows no other.
#[test]
fn the_schema_has_the_lines_fields() {
    use gpumon::export::alert_line::AlertLine;
    let changes = recorded_changes();
    let line: Value = serde_json::from_str(&AlertLine::of(&changes[0]).to_line()).expect("JSON");
    let fields: std::collections::BTreeSet<&str> = line
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    let s = schema();
    let props: std::collections::BTreeSet<&str> = s["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    let required: std::collections::BTreeSet<&str> = s["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(props, fields, "docs/alerts.schema.json properties");
    assert_eq!(required, fields, "docs/alerts.schema.json required");
    assert_eq!(s["additionalProperties"], Value::Bool(false));
}

/// The schema's `kind` list is every alert kind gpumon has, by its recorded name
/// (`AlertKind::ALL` is generated with the enum): a new kind fails here until
/// docs/alerts.schema.json lists it too.
#[test]
fn the_schema_lists_every_alert_kind() {
    use gpumon::model::alerts::AlertKind;
    let all = AlertKind::ALL;
    let names: std::collections::BTreeSet<String> = all
        .iter()
        .map(|k| serde_json::to_value(k).expect("a name"))
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let schema: std::collections::BTreeSet<String> = schema()["properties"]["kind"]["enum"]
        .as_array()
        .expect("kind enum")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert_eq!(schema, names, "docs/alerts.schema.json kind enum");
}
