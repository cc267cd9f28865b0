//! `gpumon completions SHELL`: clap_complete's scripts, plus what its fish generator leaves
//! out: the values of a positional argument (`gpumon completions <TAB>` offered file names).

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

pub(super) fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpumon", &mut out);
    if shell == Shell::Fish {
        out.extend_from_slice(fish_positional_values(&cmd).as_bytes());
    }
    out
}

/// One `complete` line per subcommand positional with a fixed set of values (`-f`: values,
/// not files), in the condition clap_complete's fish script defines for that subcommand.
fn fish_positional_values(cmd: &clap::Command) -> String {
    let mut out = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            if !values.is_empty() {
                out.push_str(&format!(
                    "complete -c gpumon -n \"__fish_gpumon_using_subcommand {}\" -f -a \"{}\"\n",
                    sub.get_name(),
                    values.join(" ")
                ));
            }
        }
    }
    out
}
