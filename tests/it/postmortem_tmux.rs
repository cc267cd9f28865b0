//! After the run, in a real terminal: at the end of every
//! bundled recording the bar and the card borders still tell which alerts there were, a
//! process that died keeps its allocator state and OOM, Enter on its past alert opens it,
//! and the alerts panel opens on the alert the bar shows, at 40x12 too. The expected
//! alerts come from the same recording replayed headless, not from numbers written here.

use std::collections::BTreeMap;

use crate::tmux_e2e::{Session, have_tmux, keys, pane, reversed_rows, start_cmd, wait_for};

const RECORDINGS: [&str; 4] = [
    "assets/demo.gpumon.jsonl.gz",
    "assets/demo-leaks.gpumon.jsonl.gz",
    "assets/demo-companion.gpumon.jsonl.gz",
    "assets/demo-grow-shrink.gpumon.jsonl.gz",
];

fn path(file: &str) -> String {
    format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))
}

/// `gpumon replay FILE` in a `w`x`h` session, paused at its end.
fn at_end(tag: &str, file: &str, w: u16, h: u16) -> Session {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {}; sleep 60",
        bin.display(),
        path(file)
    );
    let s = start_cmd(tag, w, h, &cmd);
    wait_for(&s, "REPLAY", 15);
    keys(&s, &["Space", "$"]);
    let p = wait_for(&s, " end", 20);
    assert!(p.lines().next().is_some_and(|l| l.contains(" end")), "{p}");
    // The last frames are applied before the end is reported; wait for the redraw that
    // shows them (two equal captures 500 ms apart, at most 10 s on a loaded machine).
    let mut last = pane(&s);
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = pane(&s);
        if now == last {
            break;
        }
        last = now;
    }
    s
}

/// The alerts that ended during the whole recording, per GPU: (count, worst severity,
/// how many of the worst), as `replay --headless --alerts-jsonl -` reports them.
fn past_alerts(file: &str) -> BTreeMap<u64, (usize, String, usize)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpumon"))
        .args(["replay", "--headless", "--alerts-jsonl", "-", &path(file)])
        .output()
        .expect("gpumon runs");
    assert!(out.status.success());
    let rank = |s: &str| ["info", "warning", "critical"].iter().position(|x| *x == s);
    let mut per_gpu: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON alert change");
        if v["change"] == "cleared" {
            let gpu = v["gpu"].as_u64().expect("gpu");
            let sev = v["severity"].as_str().expect("severity").to_string();
            per_gpu.entry(gpu).or_default().push(sev);
        }
    }
    per_gpu
        .into_iter()
        .map(|(gpu, sevs)| {
            let worst = sevs.iter().max_by_key(|s| rank(s)).cloned().expect("one");
            let n = sevs.iter().filter(|s| **s == worst).count();
            (gpu, (sevs.len(), worst, n))
        })
        .collect()
}

/// The selected rows once one of them satisfies `ok` (the pane redraws after a key; a
/// loaded machine may take a while), or as they are after `secs`.
fn selected_when(s: &Session, ok: impl Fn(&str) -> bool, secs: u64) -> Vec<String> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let rows = reversed_rows(s);
        if rows.iter().any(|r| ok(r)) || std::time::Instant::now() > end {
            return rows;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn mark(severity: &str) -> &'static str {
    match severity {
        "critical" => "‼",
        "warning" => "⚠",
        _ => "ℹ",
    }
}

#[test]
fn at_the_end_of_every_recording_the_bar_and_the_cards_show_the_past_alerts() {
    if !have_tmux() {
        eprintln!("skipping: tmux not installed");
        return;
    }
    let mut checked = 0;
    for (i, file) in RECORDINGS.iter().enumerate() {
        let past = past_alerts(file);
        let s = at_end(&format!("pm-end{i}"), file, 80, 24);
        let p = pane(&s);
        let bar = p.lines().rev().nth(1).unwrap_or_default().to_string();
        if past.is_empty() {
            assert!(bar.contains("no alerts"), "{file}: {bar}\n{p}");
            continue;
        }
        let count: usize = past.values().map(|v| v.0).sum();
        let worst = past
            .values()
            .max_by_key(|v| {
                ["info", "warning", "critical"]
                    .iter()
                    .position(|x| *x == v.1)
            })
            .expect("one");
        let worst_n: usize = past.values().filter(|v| v.1 == worst.1).map(|v| v.2).sum();
        let want = format!("{count} past ({} {worst_n})", mark(&worst.1));
        assert!(
            bar.contains(&want),
            "{file}: bar lacks {want:?}: {bar}\n{p}"
        );
        for (gpu, (n, sev, k)) in &past {
            let border = p
                .lines()
                .find(|l| l.starts_with('╭') && l.contains(&format!("GPU {gpu} ·")))
                .unwrap_or_else(|| panic!("{file}: no card for GPU {gpu}\n{p}"));
            let want = format!("{n} past ({} {k})", mark(sev));
            assert!(border.contains(&want), "{file}: {want:?} not on {border}");
        }
        checked += 1;
    }
    assert!(checked >= 3, "three of the recordings have alerts");
}

#[test]
fn enter_on_the_past_oom_of_a_process_that_died_opens_it_with_its_allocator_state() {
    if !have_tmux() {
        eprintln!("skipping: tmux not installed");
        return;
    }
    let s = at_end("pm-oom", "assets/demo-leaks.gpumon.jsonl.gz", 120, 40);
    keys(&s, &["a"]);
    wait_for(&s, "Alerts ", 10);
    // PID 789 died of an OOM its companion reported; its alert ended with it.
    for _ in 0..8 {
        if reversed_rows(&s)
            .iter()
            .any(|r| r.contains("789@1 leak OOM"))
        {
            break;
        }
        keys(&s, &["Down"]);
    }
    let sel = reversed_rows(&s);
    assert!(
        sel.iter().any(|r| r.contains("789@1 leak OOM")),
        "{sel:?}\n{}",
        pane(&s)
    );
    keys(&s, &["Enter"]);
    let p = wait_for(&s, "its last reported state", 10);
    let sel = selected_when(&s, |r| r.contains(" 789 "), 10);
    assert!(
        sel.iter()
            .any(|r| r.contains(" 789 ") && r.contains(" OOM ")),
        "Enter opens PID 789, listed as dead of an OOM: {sel:?}\n{p}"
    );
    assert!(p.contains("pid 789 "), "its chart:\n{p}");
    for line in [
        "its last reported state",
        "OOM x1",
        "alloc ",
        " L ",
        " of T ",
    ] {
        assert!(p.contains(line), "the allocator panel keeps {line:?}:\n{p}");
    }
    assert!(!p.contains("no companion"), "it had one:\n{p}");
    assert!(
        !p.contains('╳'),
        "no read-failure mark after the exit:\n{p}"
    );
    assert!(
        p.contains("   0 GiB┤"),
        "a dead process's axis starts at zero:\n{p}"
    );
}

#[test]
fn the_alerts_panel_opens_on_the_active_critical_alert_at_40x12() {
    if !have_tmux() {
        eprintln!("skipping: tmux not installed");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {}; sleep 60",
        bin.display(),
        path("assets/demo-companion.gpumon.jsonl.gz")
    );
    let s = start_cmd("pm-open", 40, 12, &cmd);
    wait_for(&s, "REPLAY", 15);
    keys(&s, &["Space"]);
    // The fragmentation warning comes first, then the OOM: step to the OOM.
    let bar_now = || {
        pane(&s)
            .lines()
            .rev()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    for _ in 0..4 {
        if bar_now().starts_with('‼') {
            break;
        }
        let before = pane(&s).lines().next().unwrap_or_default().to_string();
        keys(&s, &["}"]);
        // Wait for the seek to land (the header's position changes) before looking again.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while pane(&s).lines().next().unwrap_or_default() == before
            && std::time::Instant::now() < end
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let p = pane(&s);
    let bar = p.lines().rev().nth(1).unwrap_or_default().to_string();
    assert!(bar.starts_with("‼ 791@1 frag OOM"), "{bar}\n{p}");
    keys(&s, &["a"]);
    let p = wait_for(&s, "frag: 64.0MiB fits no hole", 10);
    assert!(
        p.contains("frag: 64.0MiB fits no hole"),
        "both alerts listed:\n{p}"
    );
    let sel = selected_when(&s, |r| r.contains("frag OOM"), 10);
    assert!(
        sel.iter().any(|r| r.starts_with("‼ 791@1 frag OOM")),
        "the panel opens on the bar's alert: {sel:?}\n{p}"
    );
    assert!(p.contains("critical"), "its evidence below it:\n{p}");
}
