//! At the OOM of a real recording (corpus4: tr_eaten, a fragmentation OOM under its cap;
//! ws_linear, a growing working set that met its cap), in a real terminal: the allocator
//! line shows the failing moment's numbers (the companion's OOM event), says so and how
//! old it is, and the OOM alert names the cap with sums that add up. The numbers expected
//! come from the same recording replayed headless, not from figures written here.

use gpumon::fmt::{compact, human};

use crate::tmux_e2e::{have_tmux, keys, pane, start_cmd, wait_for};

const REC: &str = "tests/corpus4/corpus4.gpumon.jsonl.gz";
/// tr_eaten and ws_linear (labels4.json).
const PIDS: [u64; 2] = [540, 546];

fn path() -> String {
    format!("{}/{REC}", env!("CARGO_MANIFEST_DIR"))
}

/// The raised OOM alert of `pid`: (message, value by evidence name).
fn oom_alert(pid: u64) -> (String, std::collections::HashMap<String, u64>) {
    static LINES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let lines = LINES.get_or_init(|| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpumon"))
            .args(["replay", "--headless", "--alerts-jsonl", "-", &path()])
            .output()
            .expect("gpumon runs");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one alert change");
        if v["pid"] == pid
            && v["change"] == "raised"
            && matches!(v["kind"].as_str(), Some("oom" | "fragmentation_oom"))
        {
            let values = v["evidence"]["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|n| {
                    (
                        n["name"].as_str().expect("name").to_string(),
                        n["bytes"].as_u64().expect("bytes"),
                    )
                })
                .collect();
            return (v["message"].as_str().expect("message").to_string(), values);
        }
    }
    panic!("no OOM alert for PID {pid}");
}

#[test]
fn the_oom_headline_names_the_cap_and_adds_up() {
    for pid in PIDS {
        let (msg, v) = oom_alert(pid);
        let (r, res, l) = (v["requested"], v["reserved"], v["allocator limit"]);
        assert!(
            res + r > l,
            "PID {pid}: the cap bound it by its own numbers"
        );
        let sums = format!(
            "ran out of memory for a {} request, bound by its allocator limit of {}: reserved {} + {} asked = {} > {}; its cache held {} free, largest hole {} < {}.",
            compact(r),
            compact(l),
            compact(res),
            compact(r),
            compact(res + r),
            compact(l),
            compact(v["T free in cache"]),
            compact(v["L largest hole"]),
            compact(r)
        );
        assert!(msg.contains(&sums), "PID {pid}: {sums}\n{msg}");
    }
    // ws_linear's growth was its working set's: not called a leak at the OOM.
    let (msg, _) = oom_alert(546);
    assert!(
        msg.contains("The working set's growth reported since epoch"),
        "{msg}"
    );
    assert!(!msg.contains("leak reported"), "{msg}");
}

/// The replay of `pids` at `w`x`h`, played to its end and settled.
fn at_the_end(w: u16, h: u16, pids: &[u64]) -> (crate::tmux_e2e::Session, String) {
    let bin = assert_cmd::cargo::cargo_bin("gpumon");
    let list: Vec<String> = pids.iter().map(u64::to_string).collect();
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {} --pid {}; sleep 60",
        bin.display(),
        path(),
        list.join(",")
    );
    let s = start_cmd(&format!("oom-moment-{w}-{}", list.join("-")), w, h, &cmd);
    wait_for(&s, "REPLAY", 15);
    // To the end of the recording.
    keys(&s, &["Space", "$"]);
    wait_for(&s, " end", 30);
    // The last frames are applied after the end is reported (a debug build on a
    // loaded machine takes a while): wait for two equal captures before reading.
    let mut last = pane(&s);
    for _ in 0..60 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = pane(&s);
        if now == last {
            break;
        }
        last = now;
    }
    (s, last)
}

/// At the end of the recording both died of their OOM: their rows keep the failing
/// moment, at every size: the request, L (and T where there is room) and how old the
/// reading is, in a shorter form where the row is narrow, never cut off. At 40x12 one
/// process fits the card, with its allocator line; each is replayed alone there.
#[test]
fn at_the_oom_the_allocator_line_shows_the_failing_moment_and_its_age() {
    if !have_tmux() {
        eprintln!("skipping: tmux not installed");
        return;
    }
    let runs: Vec<(u16, u16, Vec<u64>)> = vec![
        (200, 60, PIDS.to_vec()),
        (120, 40, PIDS.to_vec()),
        (80, 24, PIDS.to_vec()),
        (40, 12, vec![PIDS[0]]),
        (40, 12, vec![PIDS[1]]),
    ];
    for (w, h, pids) in runs {
        let (_s, p) = at_the_end(w, h, &pids);
        for pid in pids {
            let (_, v) = oom_alert(pid);
            let row = p
                .lines()
                .skip_while(|l| !l.contains(&format!(" {pid} ")))
                .nth(1)
                .unwrap_or_else(|| panic!("PID {pid}'s allocator line at {w}x{h}:\n{p}"));
            let (r, l, t) = (
                human(v["requested"]),
                human(v["L largest hole"]),
                human(v["T free in cache"]),
            );
            let mut want = vec![format!("L {l}")];
            if w >= 80 {
                want.push(format!("OOM asked {r}: "));
                want.push(format!("L {l} of T {t}"));
            } else {
                want.push(format!("OOM {r}: "));
            }
            if w >= 120 {
                want.push("(at the OOM, ".to_string());
            }
            for words in want {
                assert!(row.contains(&words), "{w}x{h} PID {pid}: {words}\n{p}");
            }
            // The age, whole: nothing of the line cut off.
            assert!(
                row.contains(" ago)") && !row.contains('…'),
                "{w}x{h} PID {pid}: the age is cut\n{p}"
            );
        }
    }
}
