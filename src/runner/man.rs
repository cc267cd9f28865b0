//! The man pages: gpumon(1) and one per subcommand (gpumon-serve(1), ...), so every page the
//! main one names exists. clap_mangen renders what clap knows (name, synopsis, options,
//! subcommands); the sections it cannot know are added here: KEYS from the key table
//! (`tui::keys`, as help and README are), ENVIRONMENT, FILES and EXIT STATUS.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_mangen::Man;
use roff::{Roff, bold, italic, roman};

use crate::cli::{Cli, exit};
use crate::tui::keys;

/// Every environment variable gpumon, its interposer or its companion reads, and what for
/// (a test checks that each one the sources read is here).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "GPUMON_DIR",
        "Directory of companion sockets, before $XDG_RUNTIME_DIR/gpumon and /tmp/gpumon-UID \
         (--socket-dir wins). gpumon run sets it for the program it starts.",
    ),
    (
        "XDG_RUNTIME_DIR",
        "Its gpumon subdirectory holds the companion sockets when GPUMON_DIR is not set.",
    ),
    (
        "XDG_CONFIG_HOME",
        "The configuration file is $XDG_CONFIG_HOME/gpumon/config.toml (else \
         ~/.config/gpumon/config.toml).",
    ),
    (
        "XDG_CACHE_HOME",
        "The interposer, the demo recordings and the companion carried inside the binary are \
         written to $XDG_CACHE_HOME/gpumon (else ~/.cache/gpumon, else /tmp/gpumon-cache-UID) \
         on first use.",
    ),
    (
        "HOME",
        "Where ~/.config and ~/.cache are when the XDG variables are not set.",
    ),
    (
        "GPUMON_PRELOAD",
        "gpumon run preloads this interposer file instead of the one inside the binary.",
    ),
    (
        "GPUMON_SELFTIME",
        "Set to 1 in a program with the Python companion: the companion times its own GIL holds and framework calls (what it costs the program; bench/companion_overhead.py reads it).",
    ),
    (
        "GPUMON_PRELOAD_DISABLE",
        "Set (and not 0): the interposer loads but stays inactive.",
    ),
    (
        "GPUMON_EPOCH_SIGNAL",
        "The interposer marks an epoch each time the program receives this signal (USR1, USR2 \
         or a number).",
    ),
    (
        "GPUMON_DISABLE",
        "1: the Python companion does not start, also under gpumon run.",
    ),
    (
        "GPUMON_DETAIL",
        "The companion's detail: default, or max (more samples and the block map).",
    ),
    (
        "GPUMON_SAMPLE_HZ",
        "The companion's samples per second (overrides the detail's).",
    ),
    (
        "GPUMON_SNAPSHOT_S",
        "Seconds between the companion's allocator snapshots (overrides the detail's).",
    ),
    (
        "GPUMON_EPOCH_GC",
        "0: the companion skips the gc.collect() that makes the epoch floor comparable.",
    ),
    (
        "GPUMON_LOG_TO",
        "The Python companion also logs gpumon's allocator series, epoch floors and peaks, \
         OOMs and alerts to these, comma-separated: wandb (the active wandb.run), \
         tensorboard or tensorboard=DIR (a SummaryWriter of the kind the program imports).",
    ),
    (
        "GPUMON_LOG_EVERY_S",
        "Seconds between two points of the series GPUMON_LOG_TO logs (default 30).",
    ),
    (
        "GPUMON_ALERTS_JSONL",
        "The file a monitor writes with --alerts-jsonl: the companion logs this process's \
         alerts from it to the GPUMON_LOG_TO targets.",
    ),
    (
        "GPUMON_DEMO",
        "gpumon demo plays this recording instead of a bundled one.",
    ),
    (
        "GPUMON_DEMO_DIR",
        "Directory searched first for the bundled recordings.",
    ),
    ("NO_COLOR", "Set: no colours (as --no-color)."),
    (
        "LC_ALL, LC_CTYPE, LANG",
        "A locale that is not UTF-8 draws with ASCII only (as --ascii).",
    ),
    (
        "CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF, \
         XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION, XLA_CLIENT_MEM_FRACTION, \
         XLA_PYTHON_CLIENT_ALLOCATOR, TF_GPU_ALLOCATOR, TF_FORCE_GPU_ALLOW_GROWTH, \
         TF_USE_LEGACY_KERAS",
        "The frameworks' own settings: the companion reads them to map devices, to report each \
         allocator's policy and to find Keras; gpumon never changes them.",
    ),
    (
        "RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID",
        "A distributed job's launcher variables (torchrun, DeepSpeed, Lightning): read from a \
         process's environment (/proc) and by its companion to name its rank and group the \
         ranks of one job; gpumon never changes them.",
    ),
    (
        "SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_STEP_ID, SLURM_JOB_NODELIST, \
         SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_NUM_TASKS",
        "Slurm's, read from a process's environment (/proc; the older SLURM_JOBID, SLURM_STEPID \
         and SLURM_NODELIST too): the job, array task and node list label its series, the \
         ranks of one srun step are one job (train.py@slurm:12345.0), and the task ids rank \
         processes no launcher gave a RANK; gpumon never changes them.",
    ),
    (
        "GPUMON_PRELOAD_SO",
        "At build time: embed this prebuilt libgpumon_preload.so instead of building it \
         (packagers).",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "$XDG_CONFIG_HOME/gpumon/config.toml",
        "The configuration file (gpumon config --print-default shows every key; --config FILE \
         reads another).",
    ),
    (
        "$GPUMON_DIR, $XDG_RUNTIME_DIR/gpumon, /tmp/gpumon-UID",
        "Companion sockets, one per process; the directory must be the user's own and not \
         writable by others.",
    ),
    (
        "$XDG_CACHE_HOME/gpumon/",
        "The interposer, demo recordings and companion unpacked from the binary, in directories \
         named by their content hash (checked on every use).",
    ),
    (
        "web config (--web-config-file FILE)",
        "TLS and basic auth for the metrics endpoint, in the Prometheus exporters' YAML format: \
         tls_server_config (cert_file, key_file, min_version, max_version; paths relative to \
         the file) and basic_auth_users (user: bcrypt hash). Read at start; a file gpumon \
         cannot honour in full is refused with status 2 (docs/metrics.md).",
    ),
    (
        "*.gpumon.jsonl",
        "Recordings written by gpumon record and --record: one JSON message per line \
         (docs/recording-format.md).",
    ),
];

/// Exit statuses, as the `exit` constants define them.
fn exit_statuses() -> Vec<(String, &'static str)> {
    vec![
        (
            "0".into(),
            "Success, or a clean stop: q, Ctrl-C, SIGINT, SIGTERM or SIGHUP (outputs flushed and \
             closed), the end of --duration, or a reader of stdout that went away \
             (gpumon replay FILE --headless --alerts-jsonl - | head -1).",
        ),
        (
            "1".into(),
            "An error (a file that cannot be read or written, no address to listen on, ...).",
        ),
        (
            exit::USAGE.to_string(),
            "A bad flag or value (an unknown demo, a filter that matches nothing live), or an \
             invalid configuration file.",
        ),
        (
            exit::ALERT.to_string(),
            "--exit-on-alert: an alert of that severity fired.",
        ),
        (
            exit::NO_GPU.to_string(),
            "No GPU could be read (gpumon snapshot).",
        ),
        (
            "128+N".into(),
            "Killed by signal N, or a second signal N while stopping: left at once, terminal \
             restored.",
        ),
        (
            "gpumon run".into(),
            "The program's own status; 127: not found, 126: not executable.",
        ),
    ]
}

/// The subcommands whose screen takes keys.
const INTERACTIVE: &[&str] = &["gpumon", "gpumon-watch", "gpumon-replay", "gpumon-demo"];

/// Every page: file name and roff text, the main page first.
pub fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let subs: Vec<clap::Command> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let names: Vec<String> = subs
        .iter()
        .map(|s| Man::new(s.clone()).get_filename())
        .collect();
    let mut out = vec![page(root, &names)?];
    for s in subs {
        out.push(page(s, &[])?);
    }
    Ok(out)
}

fn page(cmd: clap::Command, children: &[String]) -> Result<(String, Vec<u8>)> {
    let has_args = cmd
        .get_arguments()
        .any(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"));
    let has_subs = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let versioned = cmd.get_version().is_some();
    let man = Man::new(cmd);
    let name = man.get_filename();
    let title = name.trim_end_matches(".1").to_string();
    let mut w = Vec::new();
    man.render_title(&mut w)?;
    man.render_name_section(&mut w)?;
    man.render_synopsis_section(&mut w)?;
    man.render_description_section(&mut w)?;
    if has_args {
        man.render_options_section(&mut w)?;
    }
    if has_subs {
        man.render_subcommands_section(&mut w)?;
    }
    let mut r = Roff::new();
    if INTERACTIVE.contains(&title.as_str()) {
        keys_section(&mut r);
    }
    list(
        &mut r,
        "ENVIRONMENT",
        ENVIRONMENT.iter().map(|(k, v)| (k.to_string(), *v)),
    );
    list(
        &mut r,
        "FILES",
        FILES.iter().map(|(k, v)| (k.to_string(), *v)),
    );
    list(&mut r, "EXIT STATUS", exit_statuses().into_iter());
    r.control("SH", ["SEE ALSO"]);
    let mut refs: Vec<String> = if title == "gpumon" {
        children
            .iter()
            .map(|c| c.trim_end_matches(".1").to_string())
            .collect()
    } else {
        vec!["gpumon".to_string()]
    };
    refs.retain(|c| *c != title);
    let mut line = Vec::new();
    for (i, c) in refs.iter().enumerate() {
        line.push(bold(c.clone()));
        line.push(roman(if i + 1 < refs.len() { "(1), " } else { "(1)" }));
    }
    r.text(line);
    r.control("PP", []);
    r.text([roman(
        "The full documentation is in the docs/ directory of the source, beginning with README.md.",
    )]);
    w.extend_from_slice(r.to_roff().as_bytes());
    if versioned {
        man.render_version_section(&mut w)?;
    }
    Ok((name, w))
}

fn list<'a>(r: &mut Roff, heading: &str, items: impl Iterator<Item = (String, &'a str)>) {
    r.control("SH", [heading]);
    for (k, v) in items {
        r.control("TP", []);
        r.text([bold(k)]);
        r.text([roman(v)]);
    }
}

fn keys_section(r: &mut Roff) {
    r.control("SH", ["KEYS"]);
    for b in keys::listed() {
        r.control("TP", []);
        let mut line = Vec::new();
        for (i, k) in b.label.split(' ').enumerate() {
            if i > 0 {
                line.push(roman(", "));
            }
            line.push(bold(k));
        }
        r.text(line);
        r.text([roman(b.desc)]);
    }
    r.control("PP", []);
    r.text([
        roman("In a prompt (filter, confirmation) the keys type text: "),
        bold("Enter"),
        roman(" accepts, "),
        bold("Esc"),
        roman(" cancels, "),
        bold("y"),
        roman(
            " confirms. In help every key but the scrolling ones closes it. The mouse selects \
             cards, processes and alerts; a click on a column title sorts by it (again: \
             inverts), on the alert bar opens the panel on its alert; the wheel scrolls. ",
        ),
        italic("docs/interaction.md"),
        roman(" tells how selection, alerts, replay controls, sort, filter and signals behave."),
    ]);
}

/// `gpumon man --dir DIR`: every page into DIR (created if missing); the paths written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in pages()? {
        let p = dir.join(name);
        crate::fmt::out_file::write_whole(&p, &text)
            .with_context(|| format!("cannot write {}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

/// `gpumon man`: the main page, to stdout.
pub fn main_page() -> Result<Vec<u8>> {
    Ok(pages()?.swap_remove(0).1)
}
