//! The man pages: `gpumon man --dir` writes gpumon.1 and one page per subcommand, each with
//! ENVIRONMENT, FILES and EXIT STATUS (KEYS where the screen takes keys), every page a page
//! names exists, `man -l` renders each without a warning, and every environment variable the
//! sources read is documented. fish completes `gpumon completions <TAB>` with shells.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use clap::CommandFactory;
use gpumon::cli::Cli;
use gpumon::runner::man::ENVIRONMENT;

use crate::support::gpumon;

fn write_pages() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("man1");
    gpumon().args(["man", "--dir"]).arg(&out).assert().success();
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("man1 written")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (dir, names)
}

#[test]
fn man_dir_writes_a_page_per_subcommand_with_every_section() {
    let (dir, names) = write_pages();
    let mut want: BTreeSet<String> = Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("gpumon-{}.1", s.get_name()))
        .collect();
    want.insert("gpumon.1".into());
    assert_eq!(names.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert!(want.len() >= 10, "{want:?}");
    let man1 = dir.path().join("man1");
    for n in &names {
        let text = std::fs::read_to_string(man1.join(n)).expect("page");
        for section in [
            "NAME",
            "SYNOPSIS",
            "ENVIRONMENT",
            "FILES",
            "EXIT STATUS",
            "SEE ALSO",
        ] {
            assert!(
                text.contains(&format!(".SH {section}"))
                    || text.contains(&format!(".SH \"{section}\"")),
                "{n} has no {section}"
            );
        }
        for (var, _) in ENVIRONMENT {
            assert!(text.contains(var), "{n} leaves out {var}");
        }
        let interactive = [
            "gpumon.1",
            "gpumon-watch.1",
            "gpumon-replay.1",
            "gpumon-demo.1",
        ];
        assert_eq!(
            text.contains(".SH KEYS"),
            interactive.contains(&n.as_str()),
            "{n}: KEYS"
        );
        // Every page a page refers to exists (the main page once named eleven that did not).
        let mut rest = text.as_str();
        while let Some(i) = rest.find("gpumon-") {
            let tail = &rest[i..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if tail[name.len()..].starts_with("(1)") || tail[name.len()..].starts_with("\\fR(1)") {
                assert!(
                    names.contains(&format!("{name}.1")),
                    "{n} refers to {name}(1)"
                );
            }
            rest = &tail[name.len()..];
        }
    }
    let main = std::fs::read_to_string(man1.join("gpumon.1")).expect("page");
    for b in gpumon::tui::keys::listed() {
        assert!(
            main.contains(&b.desc.replace('-', "\\-")) || main.contains(b.desc),
            "KEYS leaves out {}",
            b.desc
        );
    }
    let serve = std::fs::read_to_string(man1.join("gpumon-serve.1")).expect("page");
    assert!(
        serve.contains("listen"),
        "gpumon-serve(1) documents --listen"
    );
    let record = std::fs::read_to_string(man1.join("gpumon-record.1")).expect("page");
    assert!(
        record.contains("duration"),
        "gpumon-record(1) documents --duration"
    );
}

/// What `man -l` shows a person: each page renders, with no warning from groff, and shows
/// its sections. Skipped where man is not installed, unless GPUMON_REQUIRE_MAN=1 (.ci/run
/// installs man-db and sets it).
#[test]
fn man_renders_every_page() {
    if Command::new("man").arg("--version").output().is_err() {
        assert!(
            std::env::var("GPUMON_REQUIRE_MAN").as_deref() != Ok("1"),
            "GPUMON_REQUIRE_MAN=1 (CI) but `man` cannot run"
        );
        eprintln!("skipped: no man here");
        return;
    }
    let (dir, names) = write_pages();
    for n in &names {
        let out = Command::new("man")
            .arg("-l")
            .arg(dir.path().join("man1").join(n))
            .env("MANWIDTH", "80")
            .env("MANROFFOPT", "-ww")
            .env("LANG", "C.UTF-8")
            .output()
            .expect("man runs");
        let shown = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "man -l {n}: {err}");
        assert!(err.trim().is_empty(), "man -l {n} warns: {err}");
        for s in ["NAME", "SYNOPSIS", "ENVIRONMENT", "EXIT STATUS"] {
            assert!(
                shown.lines().any(|l| l == s),
                "man -l {n} shows no {s}:\n{shown}"
            );
        }
        let stem = n.trim_end_matches(".1");
        assert!(shown.contains(stem), "{n}: {shown}");
    }
}

/// Every variable the monitor, the interposer and the companion read is in ENVIRONMENT.
#[test]
fn every_environment_variable_read_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let documented: String = ENVIRONMENT.iter().map(|(k, _)| format!("{k}, ")).collect();
    let mut read = BTreeSet::new();
    let mut stack = vec![
        root.join("src"),
        root.join("preload/src"),
        root.join("python/gpumon"),
    ];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readable").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            for pat in [
                "var_os(\"",
                "env::var(\"",
                "environ.get(\"",
                "getenv(c\"",
                "env.get(\"",
                "_env_float(\"",
            ] {
                for (i, _) in text.match_indices(pat) {
                    let name: String = text[i + pat.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        read.insert(name);
                    }
                }
            }
        }
    }
    // Not the user's to set: the terminal's own, and what `gpumon run` sets for its child.
    for internal in ["TERM", "LD_PRELOAD", "PYTHONPATH"] {
        read.remove(internal);
    }
    assert!(
        read.contains("GPUMON_DIR") && read.contains("NO_COLOR"),
        "{read:?}"
    );
    for v in &read {
        assert!(
            documented.contains(&format!("{v},")),
            "{v} is read but not in ENVIRONMENT (src/runner/man.rs)"
        );
    }
}

#[test]
fn fish_completes_shell_names() {
    let out = gpumon()
        .args(["completions", "fish"])
        .output()
        .expect("runs");
    let script = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        script.contains(
            "__fish_gpumon_using_subcommand completions\" -f -a \"bash elvish fish powershell zsh\""
        ),
        "{script}"
    );
    if Command::new("fish").arg("--version").output().is_err() {
        assert!(
            std::env::var("GPUMON_REQUIRE_FISH").as_deref() != Ok("1"),
            "GPUMON_REQUIRE_FISH=1 (CI) but `fish` cannot run"
        );
        eprintln!("skipped the fish run: no fish here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("gpumon.fish");
    std::fs::write(&file, &script).expect("write");
    let out = Command::new("fish")
        .args(["--no-config", "-c"])
        .arg(format!(
            "source {}; complete -C 'gpumon completions '",
            file.display()
        ))
        .current_dir(dir.path())
        .output()
        .expect("fish runs");
    let offered = String::from_utf8_lossy(&out.stdout);
    let words: BTreeSet<&str> = offered
        .lines()
        .map(|l| l.split('\t').next().unwrap_or(""))
        .collect();
    assert_eq!(
        words,
        ["bash", "elvish", "fish", "powershell", "zsh"]
            .into_iter()
            .collect(),
        "fish offers: {offered}"
    );
}
