//! `gpumon completions SHELL`: clap_complete's scripts, plus what its fish generator leaves
//! out: the values of a positional argument (`gpumon completions <TAB>` offered file names).
//! Arguments parsed by gpumon's own functions (severities, recording formats, demo names)
//! carry no list of values for the generators, so the command the scripts are made from is
//! given one (`with_values`): `--exit-on-alert <TAB>` offers severities, not file names.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

pub(super) fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = with_values(Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpumon", &mut out);
    if shell == Shell::Fish {
        out.extend_from_slice(fish_positional_values(&cmd).as_bytes());
    }
    out
}

const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];
const RECORD_FORMATS: [&str; 2] = ["gz", "ndjson"];

/// The command line with the values of gpumon-parsed arguments listed (what they accept is
/// checked against the parsers by the tests below).
fn with_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_subcommands(|sub| {
        let name = sub.get_name().to_string();
        let sub = sub.mut_args(|a| list_values(a, None));
        match name.as_str() {
            "record" => sub.mut_args(|a| list_values(a, Some("format"))),
            "demo" => sub.mut_arg("name", |a| {
                let names = ["list"]
                    .into_iter()
                    .chain(super::demos::DEMOS.iter().map(|d| d.name));
                a.value_parser(clap::builder::PossibleValuesParser::new(names))
            }),
            _ => sub,
        }
    })
    .mut_args(|a| list_values(a, None))
}

/// `--exit-on-alert` and `--record-format` wherever they are; `also` names one more
/// argument that takes a recording format (`record --format`).
fn list_values(a: clap::Arg, also: Option<&str>) -> clap::Arg {
    let id = a.get_id().as_str().to_string();
    if id == "exit_on_alert" {
        a.value_parser(clap::builder::PossibleValuesParser::new(SEVERITIES))
    } else if id == "record_format" || Some(id.as_str()) == also {
        a.value_parser(clap::builder::PossibleValuesParser::new(RECORD_FORMATS))
    } else {
        a
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn values(cmd: &clap::Command, sub: Option<&str>, id: &str) -> Vec<String> {
        let cmd = match sub {
            Some(s) => cmd.find_subcommand(s).expect("subcommand"),
            None => cmd,
        };
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == id)
            .expect("argument");
        arg.get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect()
    }

    #[test]
    fn listed_values_are_what_the_parsers_take() {
        let cmd = with_values(Cli::command());
        for sub in [None, Some("watch"), Some("replay")] {
            let sev = values(&cmd, sub, "exit_on_alert");
            assert_eq!(sev, SEVERITIES, "{sub:?}");
            for v in &sev {
                assert!(crate::cli::parse_severity(v).is_ok(), "{v}");
            }
        }
        for (sub, id) in [
            (None, "record_format"),
            (Some("watch"), "record_format"),
            (Some("record"), "format"),
        ] {
            let formats = values(&cmd, sub, id);
            assert_eq!(formats, RECORD_FORMATS, "{sub:?} {id}");
            for v in &formats {
                assert!(crate::record::Format::parse(v).is_ok(), "{v}");
            }
        }
        let demos = values(&cmd, Some("demo"), "name");
        assert_eq!(demos[0], "list");
        for d in &demos[1..] {
            assert!(super::super::demos::is_known(d), "{d}");
        }
        assert_eq!(demos.len(), 1 + super::super::demos::DEMOS.len());
    }

    #[test]
    fn the_bash_script_offers_the_values() {
        let text = String::from_utf8(script(Shell::Bash)).expect("utf-8");
        assert!(text.contains("info warning critical"), "severities");
        assert!(text.contains("gz ndjson"), "formats");
        assert!(
            text.contains("list h200x2 leaks fragmentation grow-shrink"),
            "demo names"
        );
    }
}
