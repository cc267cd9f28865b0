//! The fragmentation and growth signals in a real terminal, on the third corpus's recording
//! cut where the runs' own truth says (`tests/corpus3/truth3.jsonl`): F's colour and the row's risk mark
//! turn before a fragmentation OOM and never on the clean capped run beside it; the GROWTH
//! sort ranks slow leaks above clean runs whose batch size steps; the alerts panel opens
//! on the active critical alert the bar shows, at 40x12. Colours are read from
//! `capture-pane -e` (SGR codes), as a person sees them. The same moments are checked
//! through the app in `risk_signals.rs`; here the binary draws them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::tmux_e2e::{Session, have_tmux, keys, pane, reversed_rows, start_cmd, tmux};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus3")
}

/// scenario -> (pid, OOM ms after the recording's start), from the runs' own truth.
fn truth() -> BTreeMap<String, (u32, Option<i64>)> {
    let t0 = started();
    std::fs::read_to_string(corpus().join("truth3.jsonl"))
        .expect("truth")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "truth")
        .map(|v| {
            let name = v["scenario"].as_str().unwrap_or_default().to_string();
            let pid = v["pid"].as_u64().unwrap_or(0) as u32;
            (name, (pid, v["oom_t_ms"].as_i64().map(|t| t - t0)))
        })
        .collect()
}

fn started() -> i64 {
    let text = std::fs::read_to_string(corpus().join("corpus3.jsonl")).expect("recording");
    let head: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("header")).expect("json");
    head["started"].as_i64().expect("started")
}

/// The recording up to `ms` after its start, as a file of its own in `dir`: a replay of it
/// ends, and holds, on the moment asked for.
fn cut(dir: &Path, ms: i64) -> PathBuf {
    let text = std::fs::read_to_string(corpus().join("corpus3.jsonl")).expect("recording");
    let end = started() + ms;
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            if v["t"].as_i64().is_some_and(|t| t > end) {
                break;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    let path = dir.join(format!("corpus3_{ms}.jsonl"));
    std::fs::write(&path, out).expect("write the cut");
    path
}

/// `gpumon replay --speed max FILE ARGS` in a `w`x`h` pane, once the replay has ended and
/// its last moment is drawn (two equal captures in a row).
fn at_end(tag: &str, file: &Path, args: &str, w: u16, h: u16) -> Session {
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay --speed max {args} {}; sleep 120",
        assert_cmd::cargo::cargo_bin("gpumon").display(),
        file.display()
    );
    let s = start_cmd(tag, w, h, &cmd);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    loop {
        let now = pane(&s);
        let ended = now.lines().next().is_some_and(|l| l.contains(" end"));
        if ended && now == last {
            return s;
        }
        assert!(Instant::now() < deadline, "the replay did not end:\n{now}");
        last = now;
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The pane's lines with their SGR codes.
fn colored(s: &Session) -> Vec<String> {
    tmux(&["capture-pane", "-p", "-e", "-t", &s.0])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Each character of a captured line with the 256-colour foreground it is drawn in
/// (None: the terminal's default).
fn styled(line: &str) -> Vec<(char, Option<u8>)> {
    let (mut fg, mut out, mut rest) = (None, Vec::new(), line);
    loop {
        let (plain, code) = match rest.find("\x1b[") {
            Some(i) => (&rest[..i], Some(&rest[i + 2..])),
            None => (rest, None),
        };
        out.extend(plain.chars().map(|c| (c, fg)));
        let Some(code) = code else { return out };
        let Some(end) = code.find('m') else {
            return out;
        };
        let params: Vec<&str> = code[..end].split(';').collect();
        let mut i = 0;
        while i < params.len() {
            match params[i] {
                "" | "0" | "39" => fg = None,
                "38" if params.get(i + 1) == Some(&"5") => {
                    fg = params.get(i + 2).and_then(|n| n.parse().ok());
                    i += 2;
                }
                "48" if params.get(i + 1) == Some(&"5") => i += 2,
                p => match p.parse::<u8>() {
                    Ok(n @ 30..=37) => fg = Some(n - 30),
                    Ok(n @ 90..=97) => fg = Some(n - 90 + 8),
                    _ => {}
                },
            }
            i += 1;
        }
        rest = &code[end + 1..];
    }
}

/// The text of a styled line, and the colour of the character right after `prefix`.
fn after(line: &[(char, Option<u8>)], prefix: &str) -> Option<Option<u8>> {
    let text: Vec<char> = line.iter().map(|c| c.0).collect();
    let p: Vec<char> = prefix.chars().collect();
    let at = text.windows(p.len()).position(|w| w == p.as_slice())?;
    line.get(at + p.len()).map(|c| c.1)
}

const RED: u8 = 1;
const YELLOW: u8 = 3;

type Seen = (Option<(char, Option<u8>)>, Option<u8>, Option<u8>);

/// Of `pid`'s row and its allocator line (`↳ …`): the row's alert mark and its colour,
/// and the colours of F's and stranded's values.
fn risk_seen(lines: &[String], pid: u32) -> Seen {
    let lines: Vec<Vec<(char, Option<u8>)>> = lines.iter().map(|l| styled(l)).collect();
    let text = |l: &[(char, Option<u8>)]| l.iter().map(|c| c.0).collect::<String>();
    let i = lines
        .iter()
        .position(|l| text(l).contains(&format!(" {pid} root ")))
        .unwrap_or_else(|| panic!("no row for {pid}"));
    let alloc = lines.get(i + 1).cloned().unwrap_or_default();
    assert!(text(&alloc).contains('↳'), "{pid} has no allocator line");
    let mark = lines[i]
        .iter()
        .take(4)
        .find(|c| ['‼', '⚠', 'ℹ'].contains(&c.0))
        .copied();
    let f = after(&alloc, "F ").expect("F on the allocator line");
    let stranded = after(&alloc, "stranded ").expect("stranded on the allocator line");
    (mark, f, stranded)
}

#[test]
fn f_and_the_risk_mark_turn_before_a_fragmentation_oom_and_not_on_a_clean_capped_run() {
    if !have_tmux() {
        return;
    }
    let t = truth();
    let (frag, oom) = t["frag_ownhole"];
    let oom = oom.expect("frag_ownhole ends in an OOM");
    let (clean, _) = t["clean_expandable_cap"];
    let dir = tempfile::tempdir().expect("tempdir");
    let pids = format!("--pid {frag},{clean}");
    // Before its first two epochs of block maps nothing can be judged: no colour, no mark.
    let early = at_end("risk-early", &cut(dir.path(), 9_000), &pids, 120, 40);
    let lines = colored(&early);
    for pid in [frag, clean] {
        assert_eq!(risk_seen(&lines, pid), (None, None, None), "{pid} at 9 s");
    }
    drop(early);
    // Two seconds (two epochs) before the OOM: the warning mark on its row (a warning, not
    // critical: runs sat in this state for hundreds of epochs and survived), F coloured.
    let late = at_end("risk-late", &cut(dir.path(), oom - 2_000), &pids, 120, 40);
    let lines = colored(&late);
    let (mark, f, stranded) = risk_seen(&lines, frag);
    assert_eq!(mark, Some(('⚠', Some(YELLOW))), "{}", lines.join("\n"));
    assert!(
        f.is_some_and(|c| c == RED || c == YELLOW) && f == stranded,
        "F {f:?}, stranded {stranded:?}:\n{}",
        lines.join("\n")
    );
    // The clean run under the same cap (expandable segments) stays uncoloured.
    assert_eq!(risk_seen(&lines, clean), (None, None, None), "clean run");
}

#[test]
fn the_growth_sort_ranks_slow_leaks_above_batch_size_steps() {
    if !have_tmux() {
        return;
    }
    let t = truth();
    let pid = |n: &str| t[n].0;
    let dir = tempfile::tempdir().expect("tempdir");
    // At 60 s clean_sched's batch has stepped three times, clean_sched_b's twice.
    let args = format!(
        "--pid {},{},{},{}",
        pid("slow_leak_4"),
        pid("slow_leak_3"),
        pid("clean_sched"),
        pid("clean_sched_b")
    );
    let s = at_end("growth-sort", &cut(dir.path(), 60_000), &args, 120, 40);
    keys(&s, &["s", "s"]);
    let end = Instant::now() + Duration::from_secs(10);
    let mut p = pane(&s);
    while !p.contains("GROWTH") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
        p = pane(&s);
    }
    assert!(p.contains("GROWTH▼"), "sorted by growth:\n{p}");
    let row = |n: &str| {
        p.lines()
            .position(|l| l.contains(&format!(" {} root ", pid(n))))
            .unwrap_or_else(|| panic!("{n} listed:\n{p}"))
    };
    for leak in ["slow_leak_4", "slow_leak_3"] {
        for clean in ["clean_sched", "clean_sched_b"] {
            assert!(row(leak) < row(clean), "{leak} above {clean}:\n{p}");
        }
    }
}

#[test]
fn the_panel_opens_on_the_active_critical_alert_at_40x12() {
    if !have_tmux() {
        return;
    }
    let t = truth();
    let oom = t["frag_ownhole"].1.expect("an OOM");
    let dir = tempfile::tempdir().expect("tempdir");
    // Eleven alerts are active then: four critical fragmentation risks, leaks (warning).
    let s = at_end("panel-40", &cut(dir.path(), oom - 2_000), "", 40, 12);
    let p = pane(&s);
    let bar = p
        .lines()
        .rev()
        .find(|l| l.starts_with('‼'))
        .unwrap_or_else(|| panic!("a critical alert on the bar:\n{p}"))
        .to_string();
    let headline: String = bar.split(" +").next().unwrap_or(&bar).to_string();
    keys(&s, &["a"]);
    let end = Instant::now() + Duration::from_secs(10);
    let mut sel = reversed_rows(&s);
    while sel.is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
        sel = reversed_rows(&s);
    }
    let panel = pane(&s);
    assert!(panel.contains("Alerts "), "{panel}");
    assert_eq!(sel.len(), 1, "one selected row:\n{panel}");
    assert!(
        sel[0].trim_end().starts_with(headline.trim_end()),
        "the selection {:?} is the bar's alert {headline:?}:\n{panel}",
        sel[0]
    );
    assert!(sel[0].starts_with('‼'), "critical:\n{panel}");
}
