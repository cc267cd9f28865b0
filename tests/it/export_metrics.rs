//! The exposition text rendered from a model built from frames.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::export::*;
use gpumon::export::{Exporter, Format};
use proptest::prelude::*;

fn rendered(format: Format) -> String {
    let ex = Exporter::new("fallback-host".into());
    ex.publish(&state_of(&two_gpu_frames()));
    ex.render(format)
}

fn sample_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn values_come_from_the_newest_tick_in_base_units() {
    let text = rendered(Format::Prometheus);
    let g0 = r#"gpu="0",uuid="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",pci_bus_id="00000000:18:00.0",hostname="node-a""#;
    for want in [
        format!("gpumon_gpu_memory_used_bytes{{{g0}}} {}", 45 * GIB),
        format!("gpumon_gpu_memory_total_bytes{{{g0}}} {}", 141 * GIB),
        format!("gpumon_gpu_memory_reserved_bytes{{{g0}}} {}", GIB / 2),
        format!("gpumon_gpu_memory_peak_used_bytes{{{g0}}} {}", 50 * GIB),
        format!("gpumon_gpu_utilization_ratio{{{g0}}} 0.87"),
        format!("gpumon_gpu_temperature_celsius{{{g0}}} 61"),
        format!("gpumon_gpu_power_watts{{{g0}}} 612.345"),
        format!("gpumon_gpu_up{{{g0}}} 1"),
        format!(
            "gpumon_process_gpu_memory_used_bytes{{{g0},pid=\"4242\",user=\"alice\",process=\"train \\\"big\\\" \\\\ model\\nv2\"}} {}",
            32 * GIB
        ),
        format!(
            "gpumon_process_gpu_memory_peak_bytes{{{g0},pid=\"4242\",user=\"alice\",process=\"train \\\"big\\\" \\\\ model\\nv2\"}} {}",
            35 * GIB
        ),
        "gpumon_samples_total{hostname=\"node-a\"} 3".to_string(),
        "gpumon_up{hostname=\"node-a\"} 1".to_string(),
        "gpumon_last_sample_timestamp_seconds{hostname=\"node-a\"} 1700000003".to_string(),
    ] {
        assert!(
            sample_lines(&text).contains(&want.as_str()),
            "missing {want}\n{text}"
        );
    }
}

#[test]
fn unknown_values_are_absent_never_zero() {
    let text = rendered(Format::Prometheus);
    let lines = sample_lines(&text);
    // GPU 1 failed its last read: it is down, and its memory is not invented.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("gpumon_gpu_up{gpu=\"1\"") && l.ends_with(" 0"))
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("gpumon_gpu_memory_used_bytes{gpu=\"1\""))
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("gpumon_gpu_temperature_celsius{gpu=\"1\""))
    );
    // Its process keeps its peak but has no current value while unread.
    assert!(lines.iter().any(
        |l| l.starts_with("gpumon_process_gpu_memory_peak_bytes{gpu=\"1\"")
            && l.contains("pid=\"5151\"")
    ));
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("gpumon_process_gpu_memory_used_bytes{gpu=\"1\""))
    );
    // NVML never reported pid 77's memory.
    assert!(!text.contains("pid=\"77\""), "{text}");
}

#[test]
fn before_any_data_the_endpoint_still_answers() {
    let ex = Exporter::new("fresh-host".into());
    let text = ex.render(Format::Prometheus);
    assert!(
        text.contains("gpumon_up{hostname=\"fresh-host\"} 0\n"),
        "{text}"
    );
    assert!(!text.contains("gpumon_gpu_memory"));
    let om = ex.render(Format::OpenMetrics);
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn openmetrics_names_families_and_units() {
    let text = rendered(Format::OpenMetrics);
    assert!(text.ends_with("\n# EOF\n"));
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.contains("# TYPE gpumon_samples counter\n"));
    assert!(text.contains("# TYPE gpumon_gpu info\n"));
    assert!(text.contains("# UNIT gpumon_gpu_memory_used_bytes bytes\n"));
    assert!(text.contains("# UNIT gpumon_gpu_power_watts watts\n"));
    // Same samples in both formats; only metadata differs.
    assert_eq!(
        sample_lines(&text)
            .into_iter()
            .filter(|l| *l != "# EOF")
            .collect::<Vec<_>>(),
        sample_lines(&rendered(Format::Prometheus))
    );
}

#[test]
fn full_text_snapshots() {
    insta::assert_snapshot!("prometheus_text", rendered(Format::Prometheus));
    insta::assert_snapshot!("openmetrics_text", rendered(Format::OpenMetrics));
}

/// `promtool check metrics` lints the Prometheus text format (it has no
/// OpenMetrics mode; the end-to-end test has a real Prometheus parse that).
#[test]
fn promtool_accepts_the_text_format() {
    let Some(out) = promtool_check(&state_text(&synthetic_frames(8, 50, 3))) else {
        return;
    };
    assert!(out.0, "promtool check metrics failed:\n{}", out.1);
    let out = promtool_check(&rendered(Format::Prometheus)).expect("promtool ran above");
    assert!(out.0, "promtool check metrics failed:\n{}", out.1);
}

fn state_text(frames: &[gpumon::model::frame::Frame]) -> String {
    let ex = Exporter::new("h".into());
    ex.publish(&state_of(frames));
    ex.render(Format::Prometheus)
}

/// `None` when promtool is not installed (fails instead when CI requires it).
fn promtool_check(text: &str) -> Option<(bool, String)> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("GPUMON_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
                "promtool is required but cannot run: {e}"
            );
            eprintln!("skipping: promtool not installed ({e})");
            return None;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin was piped")
        .write_all(text.as_bytes())
        .expect("promtool reads its stdin");
    let out = child.wait_with_output().expect("promtool runs to the end");
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), msg))
}

/// Undo exposition escaping of one label value; `None` if it is malformed.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                'n' => out.push('\n'),
                _ => return None,
            },
            '"' | '\n' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

proptest! {
    #[test]
    fn any_process_name_survives_escaping(name in "\\PC{1,40}|[\"\\\\\n{}=,a ]{1,20}", user in "[a-z\"\\\\\n]{1,12}") {
        let mut frames = two_gpu_frames();
        frames.push(gpumon::model::frame::Frame::Procs {
            t: T0 + 3_000,
            procs: vec![gpumon::model::sample::ProcInfo {
                pid: 4242,
                user: Some(user.clone()),
                name: Some(name.clone()),
                ..Default::default()
            }],
        });
        let ex = Exporter::new("h".into());
        ex.publish(&state_of(&frames));
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let text = ex.render(format);
            let line = text
                .lines()
                .find(|l| l.starts_with("gpumon_process_gpu_memory_used_bytes") && l.contains("pid=\"4242\""))
                .expect("pid 4242 is listed");
            prop_assert!(!line.contains('\n'));
            let user_part = line.split(",user=\"").nth(1).expect("user label");
            let (user_escaped, rest) = split_value(user_part).expect("closed user value");
            prop_assert_eq!(unescape(user_escaped), Some(user.clone()));
            let name_part = rest.strip_prefix(",process=\"").expect("process label follows");
            let (name_escaped, tail) = split_value(name_part).expect("closed process value");
            prop_assert_eq!(unescape(name_escaped), Some(name.clone()));
            prop_assert_eq!(tail, format!("}} {}", 32 * GIB));
        }
    }
}

/// Split at the closing quote of an escaped value: `(value, after_quote)`.
fn split_value(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some((&s[..i], &s[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

#[test]
fn active_alerts_are_gauges_with_kind_severity_and_process() {
    use gpumon::model::alerts::{Alert, AlertKind, Evidence, Forecast, Severity};
    let alert = |kind, severity, pid, ms: Option<i64>| Alert {
        kind,
        severity,
        pid,
        gpu: 0,
        message: "m".into(),
        summary: "s".into(),
        evidence: Evidence {
            forecast: ms.map(|ms| Forecast {
                ceiling: 141 * GIB,
                ceiling_source: "card".into(),
                current: 45 * GIB,
                rate: 1.0,
                steps: 3.0,
                ms: Some(ms),
                at_epoch: None,
            }),
            ..Evidence::default()
        },
        raised_at: T0,
        raised_epoch: None,
        updated_at: T0,
        cleared_at: None,
        silenced: false,
    };
    let ex = Exporter::new("h".into());
    ex.publish(&state_of(&two_gpu_frames()));
    let growth = alert(
        AlertKind::Growth,
        Severity::Warning,
        Some(4242),
        Some(90_500),
    );
    let grab = alert(AlertKind::GrabAll, Severity::Info, None, None);
    ex.publish_alerts(&[&growth, &grab]);
    let text = ex.render(Format::Prometheus);
    let lines = sample_lines(&text);
    let g0 = r#"gpu="0",uuid="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",pci_bus_id="00000000:18:00.0",hostname="node-a""#;
    let trainer = r#"pid="4242",user="alice",process="train \"big\" \\ model\nv2""#;
    assert!(
        lines.contains(
            &format!("gpumon_alert{{{g0},{trainer},kind=\"growth\",severity=\"warning\"}} 1")
                .as_str()
        ),
        "{text}"
    );
    assert!(
        lines.contains(
            &format!("gpumon_alert{{{g0},kind=\"grab_all\",severity=\"info\"}} 1").as_str()
        ),
        "{text}"
    );
    assert!(lines.contains(&format!("gpumon_alert_exhaustion_seconds{{{g0},{trainer},kind=\"growth\",severity=\"warning\"}} 90.5").as_str()), "{text}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("gpumon_alert_exhaustion_seconds"))
            .count(),
        1
    );
    if let Some((ok, msg)) = promtool_check(&text) {
        assert!(ok, "{msg}");
    }

    ex.publish_alerts(&[]);
    assert!(
        !ex.render(Format::Prometheus).contains("gpumon_alert"),
        "cleared alerts disappear"
    );
}
