//! The name a person knows a process by, for the `process` label of every output: the
//! script of an interpreter (`python3 -u train.py --lr 3e-4` is `train.py`, every Python job
//! would otherwise be `python3`), the module of `python -m` and otherwise the executable
//! (its whole name: the kernel's `comm` stops at 15 bytes). The full command stays in the
//! outputs that have room for it (the flat logs' `command`).

/// A `multiprocessing` bootstrap: the command line of a spawn child, of the forkserver and
/// its children, or of the resource tracker. It names the machinery, not the program it runs
/// (`torch.multiprocessing.spawn` and Lightning's `ddp_spawn` ranks are such children).
pub fn is_mp_bootstrap(cmd: &str) -> bool {
    cmd.contains("--multiprocessing-fork")
        || [
            "from multiprocessing.spawn import",
            "from multiprocessing.forkserver import",
            "from multiprocessing.resource_tracker import",
        ]
        .iter()
        .any(|m| cmd.contains(m))
}

/// The program a forkserver's command line names (`'main_path': '/w/train.py'`), as the
/// command line that would run it: all a recording without the process tree tells.
pub fn forkserver_program(cmd: &str) -> Option<String> {
    if !cmd.contains("from multiprocessing.forkserver import") {
        return None;
    }
    let path = cmd.split("'main_path': '").nth(1)?.split('\'').next()?;
    let interp = cmd.split_whitespace().next()?;
    (!path.is_empty()).then(|| format!("{interp} {path}"))
}

/// Launchers whose first argument names the program that runs.
fn is_launcher(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    base.starts_with("python")
        || base.starts_with("pypy")
        || matches!(
            base,
            "env" | "uv" | "torchrun" | "accelerate" | "deepspeed" | "mpirun"
        )
}

fn base(word: &str) -> &str {
    word.rsplit('/')
        .next()
        .filter(|b| !b.is_empty())
        .unwrap_or(word)
}

/// The label from a command line (`/proc/PID/cmdline`, arguments joined by spaces), else
/// the executable name `comm`; None when neither is known.
pub fn process_label(cmdline: Option<&str>, comm: Option<&str>) -> Option<String> {
    let comm = comm.filter(|c| !c.is_empty()).map(str::to_string);
    let Some(cmd) = cmdline.filter(|c| !c.trim().is_empty()) else {
        return comm;
    };
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let launchers = words.iter().take_while(|w| is_launcher(w)).count();
    if launchers == 0 {
        return Some(base(words[0]).to_string());
    }
    let rest = &words[launchers..];
    // `uv run train.py`, `accelerate launch train.py`: a subcommand before the script.
    let rest = match rest.first() {
        Some(&("run" | "launch")) => &rest[1..],
        _ => rest,
    };
    if let Some(script) = rest
        .iter()
        .find(|w| w.ends_with(".py") && !w.starts_with('-'))
    {
        return Some(base(script).to_string());
    }
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            "-m" => return rest.get(i + 1).map(|m| m.to_string()),
            "-c" => break,
            // Python's options that take a value.
            "-X" | "-W" | "-Q" => i += 2,
            w if w.starts_with('-') => i += 1,
            w => return Some(base(w).to_string()),
        }
    }
    // `python3 -c '...'`, a bare interpreter: the interpreter it is.
    Some(base(words[launchers - 1]).to_string())
}

/// Labels that tell apart the processes of one list (a chart's legend): each process's
/// `process_label`, and where two commands share it (`scenario.py` twice), the arguments
/// in which their command lines differ, with the option that names them
/// (`scenario.py --name clean_bert`). Arguments all of them share (`--deadline 1795971387`)
/// are left out; the whole command stays in the outputs that have room for it.
pub fn distinct_labels(cmdlines: &[&str]) -> Vec<String> {
    let parts: Vec<(String, Vec<&str>)> = cmdlines
        .iter()
        .map(|c| {
            let label = process_label(Some(c), None).unwrap_or_default();
            let words: Vec<&str> = c.split_whitespace().collect();
            // The arguments after the word the label names (a script, a module, a program).
            let at = words
                .iter()
                .position(|w| *w == label || base(w) == label)
                .map_or(words.len(), |i| i + 1);
            (label, words[at..].to_vec())
        })
        .collect();
    parts
        .iter()
        .map(|(label, args)| {
            let others: Vec<&Vec<&str>> = parts
                .iter()
                .filter(|(l, a)| l == label && a != args)
                .map(|(_, a)| a)
                .collect();
            if others.is_empty() || label.is_empty() {
                return label.clone();
            }
            // The span of arguments that differ from some other command with this label:
            // from the first index where any differs to the last, counted from the end.
            let first = others
                .iter()
                .map(|o| {
                    args.iter()
                        .zip(o.iter())
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .min()
                .unwrap_or(0);
            let common_tail = others
                .iter()
                .map(|o| {
                    args.iter()
                        .rev()
                        .zip(o.iter().rev())
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .min()
                .unwrap_or(0);
            let last = args
                .len()
                .saturating_sub(common_tail)
                .max(first + 1)
                .min(args.len());
            if first >= last {
                return label.clone();
            }
            // A differing value keeps the option before it (`--name clean_bert`).
            let from =
                if first > 0 && args[first - 1].starts_with('-') && !args[first].starts_with('-') {
                    first - 1
                } else {
                    first
                };
            let words: Vec<&str> = args[from..last].iter().map(|w| base(w)).collect();
            format!("{label} {}", words.join(" "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{distinct_labels, process_label};

    fn label(cmd: &str) -> String {
        process_label(Some(cmd), Some("comm")).expect("a label")
    }

    #[test]
    fn interpreters_are_named_by_their_script() {
        assert_eq!(label("python3 train.py --lr 3e-4"), "train.py");
        assert_eq!(
            label("/usr/bin/python3.12 -u /home/a/runs/train_bert.py --name run7"),
            "train_bert.py"
        );
        assert_eq!(
            label("/usr/bin/env python3 -X dev scripts/eval.py"),
            "eval.py"
        );
        assert_eq!(
            label("torchrun --nproc_per_node 8 --standalone train.py --bs 4"),
            "train.py"
        );
        assert_eq!(label("uv run finetune.py"), "finetune.py");
        assert_eq!(
            label("python -m torch.distributed.run --nproc_per_node 2 x"),
            "torch.distributed.run"
        );
        assert_eq!(
            label("python3 -m vllm.entrypoints.api_server"),
            "vllm.entrypoints.api_server"
        );
        assert_eq!(label("python3 -c import torch"), "python3");
        assert_eq!(label("python3"), "python3");
        assert_eq!(label("python3 ./serve"), "serve");
    }

    /// Real command lines of `multiprocessing` children (Python 3.12, torch 2.5).
    const SPAWN: &str = "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; \
        spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork";
    const FORKSERVER: &str = "/usr/bin/python3 -c from multiprocessing.forkserver import main; \
        main(9, 10, ['__main__'], **{'sys_path': ['/w', '/usr/lib/python312.zip'], \
        'main_path': '/w/ddp_fork.py'})";

    #[test]
    fn multiprocessing_bootstraps_are_told_from_programs() {
        assert!(super::is_mp_bootstrap(SPAWN));
        assert!(super::is_mp_bootstrap(FORKSERVER));
        assert!(super::is_mp_bootstrap(
            "python3 -c from multiprocessing.resource_tracker import main;main(6)"
        ));
        assert!(!super::is_mp_bootstrap(
            "python3 train.py --multiprocessing"
        ));
        assert!(!super::is_mp_bootstrap("python3 -c import torch"));
        assert_eq!(
            super::forkserver_program(FORKSERVER).as_deref(),
            Some("/usr/bin/python3 /w/ddp_fork.py")
        );
        assert_eq!(super::forkserver_program(SPAWN), None);
    }

    #[test]
    fn other_programs_by_their_whole_executable_name() {
        assert_eq!(
            label("/opt/llama.cpp/bin/llama-server-cuda-12 --port 8080"),
            "llama-server-cuda-12"
        );
        assert_eq!(label("./a.out"), "a.out");
        assert_eq!(
            process_label(None, Some("python3")).as_deref(),
            Some("python3")
        );
        assert_eq!(process_label(Some("  "), Some("x")).as_deref(), Some("x"));
        assert_eq!(process_label(None, None), None);
        assert_eq!(process_label(None, Some("")), None);
    }

    #[test]
    fn labels_keep_the_arguments_that_tell_processes_apart() {
        let runs = [
            "python3 /w/corpus/scenario.py --name clean_bert --deadline 1795971387 --hold-until 1795971395",
            "python3 /w/corpus/scenario.py --name clean_jax --deadline 1795971387 --hold-until 1795971395",
            "python3 /w/gpu/hold.py 3 40 uuid-proc",
            "python3 /w/gpu/hold.py 5 40 int-proc",
            "python3 /w/gpu/grow_shrink.py 70 2 24",
            "/opt/llama-server --port 8080",
        ];
        assert_eq!(
            distinct_labels(&runs),
            [
                "scenario.py --name clean_bert",
                "scenario.py --name clean_jax",
                "hold.py 3 40 uuid-proc",
                "hold.py 5 40 int-proc",
                "grow_shrink.py",
                "llama-server",
            ]
        );
        // The same command twice: nothing tells them apart but their PIDs.
        let twice = ["python3 train.py --lr 3e-4", "python3 train.py --lr 3e-4"];
        assert_eq!(distinct_labels(&twice), ["train.py", "train.py"]);
        // Differing options keep their values; a differing last argument is kept whole.
        let opts = [
            "torchrun --nproc_per_node 8 train.py --bs 4 --out /runs/a",
            "torchrun --nproc_per_node 8 train.py --bs 8 --out /runs/b",
        ];
        assert_eq!(
            distinct_labels(&opts),
            ["train.py --bs 4 --out a", "train.py --bs 8 --out b"]
        );
        assert_eq!(distinct_labels(&["", "x"]), ["", "x"]);
    }
}
