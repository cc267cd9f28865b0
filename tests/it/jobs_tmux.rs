//! Distributed jobs in a real terminal, over the four real H200 jobs of `tests/corpus_jobs`
//! cut 70 s in (every rank running, both divergent ranks found): at 80x24 each job is one
//! folded row with its ranks found of WORLD_SIZE; the divergent-rank alert names the rank;
//! the job whose rank 0 holds a constant extra carries no alert; `J` unfolds the jobs into
//! rank rows that say `[rank R]` and what runs (the script of a torchrun rank; for a spawn
//! child, whose script this recording does not hold, "spawn child", never the
//! spawn bootstrap's code).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::tmux_e2e::{Session, have_tmux, keys, pane, start_cmd};

const PIDS: &str = "591,592,634,635,638,639,640,650,651";

/// The recording up to `ms` after its start, as a plain file in `dir`.
fn cut(dir: &Path, ms: i64) -> PathBuf {
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_jobs/jobs.gpumon.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(rec).expect("recording"))
        .read_to_string(&mut text)
        .expect("gzip");
    let mut lines = text.lines();
    let head = lines.next().expect("header");
    let v: serde_json::Value = serde_json::from_str(head).expect("json");
    let end = v["started"].as_i64().expect("started") + ms;
    let mut out = format!("{head}\n");
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        if v["t"]
            .as_i64()
            .or(v["at"].as_i64())
            .is_some_and(|t| t > end)
        {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    let path = dir.join("jobs_cut.jsonl");
    std::fs::write(&path, out).expect("write the cut");
    path
}

/// `gpumon replay --speed max` of `file` (the jobs' ranks only) in a `w`x`h` pane, once its
/// last moment is drawn.
fn at_end(tag: &str, file: &Path, w: u16, h: u16) -> Session {
    let cmd = format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay --speed max --pid {PIDS} {}; sleep 120",
        assert_cmd::cargo::cargo_bin("gpumon").display(),
        file.display()
    );
    let s = start_cmd(tag, w, h, &cmd);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    loop {
        let now = pane(&s);
        if now.lines().next().is_some_and(|l| l.contains(" end")) && now == last {
            return s;
        }
        assert!(Instant::now() < deadline, "the replay did not end:\n{now}");
        last = now;
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn settle(s: &Session) -> String {
    let mut last = pane(s);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(250));
        let now = pane(s);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

fn row<'a>(screen: &'a str, has: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(has))
        .unwrap_or_else(|| panic!("no row with {has:?}:\n{screen}"))
}

#[test]
fn jobs_fold_at_80x24_and_the_divergent_rank_is_named() {
    if !have_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = cut(tmp.path(), 70_000);
    let s = at_end("jobs80", &file, 80, 24);
    let screen = pane(&s);
    // Four jobs, one row each, folded: ranks found of WORLD_SIZE, their memory's spread.
    for (job, ranks) in [
        ("python3@591", "2 of 2 ranks"),
        ("python3@634", "2 of 2 ranks"),
        ("job.py@638", "3 of 3 ranks"),
        ("job.py@650", "2 of 2 ranks"),
    ] {
        let r = row(&screen, &format!("▸ {job}  {ranks}"));
        assert!(r.contains("max "), "{r}");
    }
    assert!(!screen.contains("[rank"), "folded: no rank rows\n{screen}");
    assert!(!screen.contains("spawn_main"), "{screen}");
    // The leaking jobs carry the alert mark; the constant extra and the clean job do not.
    assert!(row(&screen, "python3@634").starts_with("│⚠ ▸"), "{screen}");
    assert!(row(&screen, "job.py@650").starts_with("│⚠ ▸"), "{screen}");
    assert!(row(&screen, "job.py@638").starts_with("│  ▸"), "{screen}");
    assert!(row(&screen, "python3@591").starts_with("│  ▸"), "{screen}");
    // The alerts panel names the ranks that diverge, and nothing of the extra's job.
    keys(&s, &["a"]);
    let panel = settle(&s);
    assert!(panel.contains("635@0 rank 1 +"), "{panel}");
    assert!(panel.contains("650@0 rank 0 +"), "{panel}");
    // Every alert about a rank says the rank (the growth alert too).
    assert!(panel.contains("leak +24.0M/ep"), "{panel}");
    assert!(panel.contains("PID 635 [rank 1] on GPU 0"), "{panel}");
    for pid in ["638", "639", "640", "591", "592"] {
        assert!(!panel.contains(&format!("{pid}@0")), "{pid}: {panel}");
    }
    // Unfolded: each rank on its row, under its job's row.
    keys(&s, &["Escape"]);
    settle(&s);
    keys(&s, &["J"]);
    let open = settle(&s);
    assert!(open.contains("▾ python3@634  2 of 2 ranks"), "{open}");
    // This recording has no process tree: the spawn child's script is not known, and the
    // row says what it is instead of the bootstrap's code.
    let spawn = row(&open, "[rank 0] python3 spawn child");
    assert!(spawn.contains(" 634 "), "{spawn}");
    assert!(!open.contains("spawn_main"), "{open}");
    assert!(open.contains("jobs unfolded"), "{open}");
}

#[test]
fn torchrun_ranks_show_their_script_and_rank_at_120x40() {
    if !have_tmux() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = cut(tmp.path(), 70_000);
    let s = at_end("jobs120", &file, 120, 40);
    keys(&s, &["J"]);
    let open = settle(&s);
    for r in 0..3 {
        let line = row(&open, &format!("[rank {r}] job.py --epochs 270"));
        assert!(line.contains(&format!("{}", 638 + r)), "{line}");
    }
    assert!(
        open.contains("▾ job.py@638  3 of 3 ranks  GPU 0  min "),
        "{open}"
    );
    // Back to one row per job.
    keys(&s, &["J"]);
    let folded = settle(&s);
    assert!(folded.contains("▸ job.py@638  3 of 3 ranks"), "{folded}");
    assert!(!folded.contains("[rank 2]"), "{folded}");
}
