//! Keys in a real terminal: Ctrl-Z suspends to the shell and `fg` brings the
//! screen back without its letters being read as keys (and a replay resumes where it stood); in the alerts panel Home/End/g/G
//! move in the list (they once reset the replay to 0:00), and `q` closes help. Without a
//! job-control shell Ctrl-Z says why it does not suspend.

use crate::tmux_e2e::{have_tmux, keys, literal, pane, position, start_cmd, wait_for};

fn recording() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/demo-leaks.gpumon.jsonl.gz")
        .display()
        .to_string()
}

fn gpumon_replay() -> String {
    format!(
        "env LANG=C.UTF-8 TERM=xterm-256color {} replay {}",
        assert_cmd::cargo::cargo_bin("gpumon").display(),
        recording()
    )
}

#[test]
fn ctrl_z_gives_the_shell_back_and_fg_redraws_without_reading_fg_as_keys() {
    if !have_tmux() {
        return;
    }
    // An interactive shell with job control, as a person has in tmux.
    let s = start_cmd(
        "ctrlz",
        80,
        24,
        "env PS1='shell$ ' bash --norc --noprofile -i",
    );
    wait_for(&s, "shell$", 10);
    literal(&s, &gpumon_replay());
    keys(&s, &["Enter"]);
    wait_for(&s, "REPLAY", 15);
    keys(&s, &["Space"]);
    let before = wait_for(&s, "paused", 5);
    assert!(before.contains("paused"), "{before}");
    let scale = "f: card scale";
    assert!(before.contains(scale), "the card offers f:\n{before}");
    keys(&s, &["C-z"]);
    let p = wait_for(&s, "Stopped", 5);
    assert!(p.contains("Stopped"), "the shell reports the stop:\n{p}");
    assert!(!p.contains("REPLAY"), "the normal screen is back:\n{p}");
    // The terminal is cooked again: what is typed is echoed by the shell.
    literal(&s, "echo typed-$((6*7))");
    keys(&s, &["Enter"]);
    let p = wait_for(&s, "typed-42", 5);
    assert!(p.contains("typed-42"), "the shell reads keys:\n{p}");
    literal(&s, "fg");
    keys(&s, &["Enter"]);
    let after = wait_for(&s, "REPLAY", 5);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = if after.contains(scale) {
        pane(&s)
    } else {
        after
    };
    assert!(after.contains("REPLAY"), "fg redraws gpumon:\n{after}");
    assert!(
        !after.contains("typed-42"),
        "every cell repainted:\n{after}"
    );
    assert!(
        after.contains(scale) && after.contains("paused"),
        "`f` of fg did not toggle the scale, nothing unpaused:\n{after}"
    );
    assert_eq!(position(&after), position(&before), "no seek either");
    // A playing replay resumes where it stood, not ahead by the time it was stopped.
    keys(&s, &["Space"]);
    let playing = pane(&s);
    keys(&s, &["C-z"]);
    wait_for(&s, "Stopped", 5);
    std::thread::sleep(std::time::Duration::from_secs(5));
    literal(&s, "fg");
    keys(&s, &["Enter"]);
    let back = wait_for(&s, "REPLAY", 5);
    let moved = position(&back) - position(&playing);
    assert!(
        moved <= 3,
        "{moved} s on after 5 s stopped:\n{playing}\n{back}"
    );
    // And it still takes keys, and gives a sane terminal back on q.
    keys(&s, &["q"]);
    let p = wait_for(&s, "shell$", 5);
    literal(&s, "stty -a | grep -o ' -icanon\\| icanon'");
    keys(&s, &["Enter"]);
    let p2 = wait_for(&s, " icanon", 5);
    assert!(p2.contains(" icanon"), "canonical mode after q:\n{p}\n{p2}");
}

#[test]
fn home_in_the_alerts_panel_moves_the_selection_not_the_replay_and_q_closes_help() {
    if !have_tmux() {
        return;
    }
    let s = start_cmd(
        "homekeys",
        80,
        24,
        &format!("{}; sleep 60", gpumon_replay()),
    );
    // The length shows once the marks are scanned: then `}` reaches the alerts.
    wait_for(&s, "/ 2:22", 15);
    keys(&s, &["}", "}"]);
    keys(&s, &["Space"]);
    let p = wait_for(&s, "paused", 5);
    let at = position(&p);
    assert!(at > 0, "past the start:\n{p}");
    keys(&s, &["a"]);
    let panel = wait_for(&s, "Alerts ", 5);
    assert!(panel.contains("Alerts "), "{panel}");
    for k in ["End", "Home", "G", "g"] {
        keys(&s, &[k]);
        let p = pane(&s);
        assert!(p.contains("Alerts "), "{k} stays in the panel:\n{p}");
        assert_eq!(position(&p), at, "{k} does not seek:\n{p}");
    }
    // Started by `sh -c` (no job control): nothing could `fg` it, so Ctrl-Z says so and
    // gpumon stays (a stop would hang the pane).
    keys(&s, &["C-z"]);
    let p = wait_for(&s, "not suspended", 5);
    assert!(p.contains("not suspended") && p.contains("Alerts "), "{p}");
    keys(&s, &["?"]);
    let help = wait_for(&s, "keys 1/2", 5);
    assert!(help.contains("q or Esc closes"), "{help}");
    keys(&s, &["q"]);
    let p = pane(&s);
    assert!(!p.contains("keys 1/2"), "q closed help:\n{p}");
    assert!(p.contains("Alerts "), "and gpumon still runs:\n{p}");
    keys(&s, &["0"]);
    let p = pane(&s);
    assert_eq!(position(&p), 0, "0 seeks to the start:\n{p}");
}
