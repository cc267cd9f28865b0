use clap::{CommandFactory, FromArgMatches};

use gpumon::cli::{Cli, Command, exit};

fn main() {
    // Before anything runs: the code starting runs is spread over the binary too, and each
    // page it touches would bring its 64 KiB block with it (runner/fault_pages.rs).
    gpumon::runner::one_page_per_fault();
    // A monitor allocates little: one malloc arena per thread would only add resident pages.
    // SAFETY: called before any other thread exists; mallopt only tunes the allocator.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some(why) = gpumon::cli::flag_before_subcommand(&matches) {
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, why)
            .exit();
    }
    cli.once_as_snapshot();
    // A bad configuration is a usage error: nothing has started, and the message names the key.
    // Commands that read none of it work whatever the file holds: a shell that runs
    // `gpumon completions` at every start must not break on a typo in it.
    let load = if reads_config(&cli.command) {
        gpumon::config::load(cli.config.as_deref())
    } else {
        Ok(Default::default())
    };
    let settings = match load {
        Ok(cfg) => {
            gpumon::config::apply(&cfg, &mut cli, &matches);
            cfg.settings
        }
        Err(e) if matches!(cli.command, Some(Command::Config(ref c)) if c.print_default || c.path) =>
        {
            gpumon::say!("gpumon: {e:#}");
            Default::default()
        }
        Err(e) => {
            gpumon::say!("gpumon: {e:#}");
            std::process::exit(exit::USAGE);
        }
    };
    match gpumon::runner::main_entry(cli, &settings) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            gpumon::say_error!("gpumon: {e:#}");
            let usage = e.downcast_ref::<gpumon::cli::UsageError>().is_some();
            std::process::exit(if usage { exit::USAGE } else { 1 });
        }
    }
}

/// Whether a command uses the configuration file (`completions`, `man`, `dashboard`, `demo
/// list` and `snapshot` read none of it; `config` reports on it itself).
fn reads_config(command: &Option<Command>) -> bool {
    match command {
        Some(
            Command::Completions { .. }
            | Command::Man(_)
            | Command::Dashboard(_)
            | Command::Snapshot(_),
        ) => false,
        Some(Command::Demo(d)) => d.name.as_deref() != Some("list"),
        _ => true,
    }
}
