//! Command line. `gpumon` alone watches live (or plays the bundled recording without a GPU).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::record::Format;
use crate::source::replay::Speed;

#[derive(Debug, Parser)]
#[command(name = "gpumon", version, about = "Live terminal GPU memory monitor", long_about = None)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Configuration file (default: $XDG_CONFIG_HOME/gpumon/config.toml, if it exists;
    /// `gpumon config --print-default` shows every key). Flags override it.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub watch: WatchArgs,
}

impl Cli {
    /// `-1` (`gpumon -1`, `gpumon watch -1`) is `gpumon snapshot` with the watch's filter:
    /// turned into that command before anything reads the rest, so it behaves as snapshot
    /// does (no configuration read, the same output and exit status).
    pub fn once_as_snapshot(&mut self) {
        let watch = match &self.command {
            None => &self.watch,
            Some(Command::Watch(w)) => w,
            _ => return,
        };
        if watch.once {
            self.command = Some(Command::Snapshot(SnapshotArgs {
                format: None,
                json: false,
                filter: watch.filter.clone(),
            }));
        }
    }
}

/// Exit statuses, so scripts and schedulers can tell the outcomes apart.
pub mod exit {
    /// A bad flag or value, or an invalid configuration (clap's convention).
    pub const USAGE: i32 = 2;
    /// `--exit-on-alert` fired.
    pub const ALERT: i32 = 3;
    /// No GPU could be read (sysexits' EX_UNAVAILABLE); nvidia-smi's codes are NVML's own.
    pub const NO_GPU: i32 = 69;
}

/// An error in what the user asked for (a flag value or a configuration file found invalid
/// after parsing): reported like clap's own usage errors, with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

const EXIT_CODES_HELP: &str = "Exit status: 0 ok (also a clean stop by SIGINT, SIGTERM or SIGHUP), 1 error, 2 usage or configuration error, \
3 alert (--exit-on-alert), 69 no GPU (snapshot), 128+N killed by signal N (or a second one); \
`gpumon run`: the program's own status, 127 not found, 126 not executable.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch live GPUs in the terminal (the default).
    Watch(WatchArgs),
    /// Play a recording in the TUI (or headless).
    Replay(ReplayArgs),
    /// Sample headless into a recording file.
    Record(RecordArgs),
    /// Write a recording's story as one self-contained HTML page (or Markdown).
    Report(ReportArgs),
    /// Print one sample of everything and exit.
    Snapshot(SnapshotArgs),
    /// Play a bundled recording of a real H200 run (`gpumon demo list` names them).
    Demo(DemoArgs),
    /// Serve Prometheus/OpenMetrics metrics headless (live, or from a recording).
    Serve(ServeArgs),
    /// Run a program with the gpumon companion loaded (Python) and report to gpumon.
    Run {
        /// The command to run, after `--`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<std::ffi::OsString>,
    },
    /// The configuration file: print the default one, or check the one in use.
    Config(ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write every page with --dir.
    Man(ManArgs),
    /// Print the Grafana dashboard, the Prometheus scrape example or the alerting rules, or
    /// write all three with --write.
    Dashboard(DashboardArgs),
}

#[derive(Debug, Args, Clone)]
pub struct DashboardArgs {
    /// Which file to print: `grafana` (the dashboard, to import into Grafana 10+),
    /// `prometheus` (a scrape configuration), `alert-rules` (Prometheus rules that forward
    /// gpumon's alerts to Alertmanager).
    #[arg(value_enum, default_value_t = MonitoringFile::Grafana)]
    pub which: MonitoringFile,
    /// Write all three into DIR (created if missing) as grafana-dashboard.json,
    /// prometheus.yml and alert-rules.yml, and print their paths.
    #[arg(long, value_name = "DIR", conflicts_with = "which")]
    pub write: Option<PathBuf>,
}

/// The monitoring files `gpumon dashboard` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MonitoringFile {
    Grafana,
    Prometheus,
    AlertRules,
}

impl MonitoringFile {
    /// The file's name in assets/ and under `--write DIR`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Grafana => "grafana-dashboard.json",
            Self::Prometheus => "prometheus.yml",
            Self::AlertRules => "alert-rules.yml",
        }
    }
}

#[derive(Debug, Args, Clone)]
pub struct ManArgs {
    /// Write gpumon.1 and one page per subcommand (gpumon-serve.1, ...) into DIR, e.g.
    /// ~/.local/share/man/man1 (created if missing); without it, gpumon.1 goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ConfigArgs {
    /// Print a complete configuration with every default, commented.
    #[arg(long)]
    pub print_default: bool,
    /// Print the path gpumon reads.
    #[arg(long)]
    pub path: bool,
}

/// Which GPUs and processes to watch; everything else is left out of the view and the outputs.
#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Only these GPUs: NVML indices or UUIDs (prefixes allowed), comma-separated: --gpu 0,2.
    #[arg(long, value_name = "IDS", value_delimiter = ',', value_parser = parse_gpu_id)]
    pub gpu: Vec<String>,
    /// Only processes of these users (names or numeric uids), comma-separated (-u as in htop).
    #[arg(long, short = 'u', value_name = "USERS", value_delimiter = ',')]
    pub user: Vec<String>,
    /// Only these process ids, comma-separated (-p as in htop).
    #[arg(long, short = 'p', value_name = "PIDS", value_delimiter = ',')]
    pub pid: Vec<u32>,
}

#[derive(Debug, Args, Clone, Default)]
pub struct DemoArgs {
    /// Which recording: `list` prints them; without a name, the richest one.
    pub name: Option<String>,
    #[command(flatten)]
    pub display: DisplayArgs,
}

/// How the terminal UI draws: only the modes that have one (watch, replay, demo) take these.
#[derive(Debug, Args, Clone, Default)]
pub struct DisplayArgs {
    /// Draw with ASCII only (automatic when the locale is not UTF-8).
    #[arg(long)]
    pub ascii: bool,
    /// No colours (also when NO_COLOR is set).
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct WatchArgs {
    /// Sampling interval with a unit: 1s, 250ms, 10ms (minimum 10 ms).
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = DEFAULT_INTERVAL)]
    pub interval: Duration,
    /// htop's and nvtop's delay: a bare number is tenths of a second as they read it (-d 10
    /// is 1s); with a unit, as --interval (-d 500ms).
    #[arg(short = 'd', value_name = "DELAY", value_parser = parse_delay, conflicts_with = "interval")]
    pub delay: Option<Duration>,
    /// nvitop's once: print one snapshot and exit, as `gpumon snapshot` (--gpu, --user and
    /// --pid still filter it).
    #[arg(short = '1', long, conflicts_with_all = ONCE_CONFLICTS)]
    pub once: bool,
    /// Also record everything to this file while watching.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Format of --record: gz (compressed, the default) or ndjson (plain text).
    #[arg(long, value_name = "FORMAT", value_parser = Format::parse, default_value = "gz")]
    pub record_format: Format,
    /// Directory of companion sockets (default: $GPUMON_DIR, $XDG_RUNTIME_DIR/gpumon, /tmp/gpumon-UID).
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub display: DisplayArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// The cluster view: every node a Prometheus server scrapes, read from there.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Cluster (every node's `gpumon serve`, read from Prometheus)")]
pub struct FleetArgs {
    /// Watch the nodes a Prometheus server scrapes instead of this machine:
    /// http(s)://HOST[:PORT][/PREFIX] (port 9090 by default). The nodes come first, the
    /// worst at the top; Enter opens one's GPUs and processes, Esc goes back.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// How to reach it, in the HTTP client format Prometheus's tools read: basic_auth
    /// (username, password_file), authorization (credentials_file), tls_config (ca_file,
    /// server_name).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_http_config: Option<PathBuf>,
    /// How often to ask Prometheus (it holds what it scraped: asking faster than its
    /// scrape interval re-reads the same values).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "5s", requires = "prometheus")]
    pub prometheus_refresh: Duration,
    /// Longest wait for one answer; past it the screen says so and keeps the last one.
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "10s", requires = "prometheus")]
    pub prometheus_timeout: Duration,
    /// Only the nodes that match: `node=PAT job=PAT user=PAT` and bare words (every term
    /// must match; `*` globs). `/` in the node list changes it.
    #[arg(long = "match", value_name = "SELECTOR", requires = "prometheus")]
    pub selector: Option<String>,
}

/// Outputs every mode can feed: metrics endpoint, flat logs, alerts.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Also serve Prometheus metrics on this address: :19464 (loopback), HOST:PORT, [::1]:19464.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub serve: Option<SocketAddr>,
    /// TLS and basic auth for --serve, in the Prometheus exporters' web config format
    /// (tls_server_config, basic_auth_users with bcrypt hashes; docs/metrics.md).
    #[arg(long, value_name = "FILE", requires = "serve")]
    pub web_config_file: Option<PathBuf>,
    /// The name this node gives itself in every metric's `hostname` label (default: the
    /// host name, or a recording's host): what `gpumon --prometheus` lists it by.
    #[arg(long, value_name = "NAME", value_parser = parse_node, requires = "serve")]
    pub node: Option<String>,
    /// Write one CSV row per GPU and per process per sample (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write one JSON line per GPU and per process per sample (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// No terminal UI: sample (or replay) and write the outputs only.
    #[arg(long)]
    pub headless: bool,
    /// Write every alert change as a JSON line to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub alerts_jsonl: Option<PathBuf>,
    /// Exit with status 3 as soon as an alert of this severity (info, warning, critical) fires.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity)]
    pub exit_on_alert: Option<crate::model::alerts::Severity>,
    /// Ring the terminal bell when an alert is raised or worsens.
    #[arg(long)]
    pub bell: bool,
    /// Alert thresholds as JSON; missing fields keep their defaults, unknown ones are an error
    /// (all of them: assets/alerts-config.json, explained in docs/alerts.md).
    #[arg(long, value_name = "FILE")]
    pub alerts_config: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on: :PORT (loopback), HOST:PORT, [::1]:PORT, NAME:PORT; loopback
    /// unless told otherwise (0.0.0.0:PORT for every interface).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = crate::export::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// TLS and basic auth, in the web config format node_exporter and dcgm-exporter take:
    /// tls_server_config (cert_file, key_file, min_version) and basic_auth_users (user: bcrypt
    /// hash). Checked at start; a file gpumon cannot honour in full is refused.
    #[arg(long, value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    /// The name this node gives itself in every metric's `hostname` label (default: the
    /// host name, or a recording's host): what `gpumon --prometheus` lists it by.
    #[arg(long, value_name = "NAME", value_parser = parse_node)]
    pub node: Option<String>,
    /// Serve a recording instead of live GPUs (played at --speed, then held at its end).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Log with levels: each line of stderr starts with its UTC time (RFC 3339) and level,
    /// and lines below LEVEL are dropped: error, warn, or info (where it serves or records,
    /// and why it stopped). Without it, plain lines, none dropped.
    #[arg(long, value_name = "LEVEL", value_enum)]
    pub log_level: Option<crate::fmt::LogLevel>,
    /// Replay speed for --replay.
    #[arg(long, value_parser = Speed::parse, default_value = "max")]
    pub speed: Speed,
    /// Sampling interval when live, with a unit: 1s, 250ms.
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = DEFAULT_INTERVAL)]
    pub interval: Duration,
    /// Directory of companion sockets.
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args, Clone)]
pub struct ReplayArgs {
    /// The recording to play.
    pub file: PathBuf,
    /// Playback speed: a factor above 0 up to 100000 (1, 10, 0.5) or `max` to jump to the
    /// end. Default: 1 in the terminal, max with --headless (a headless replay at 1 plays
    /// in real time, e.g. to feed --serve).
    #[arg(long, value_parser = Speed::parse, conflicts_with = "follow", allow_negative_numbers = true)]
    pub speed: Option<Speed>,
    /// Keep reading as the file grows (attach to a running `gpumon record`); shows the
    /// newest data as it comes, so there is no speed and no stepping back.
    #[arg(long)]
    pub follow: bool,
    /// Refuse a recording with a corrupt line (default: skip it, with a warning naming
    /// its line and column, and play the rest).
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args, Clone)]
pub struct RecordArgs {
    /// Output file (default: HOST-DATE-TIME.gpumon.jsonl.gz here, .gpumon.jsonl with
    /// --format ndjson).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// gz: gzip, about 10x smaller than text and readable while it is written (replay
    /// --follow); a crash or kill loses at most the last second. ndjson: plain text.
    /// Readers take either, whatever the file's name.
    #[arg(long, value_name = "FORMAT", value_parser = Format::parse, default_value = "gz")]
    pub format: Format,
    /// Stop after this long: 90s, 10m, 2h (default: until interrupted).
    #[arg(long, value_name = "DURATION", value_parser = parse_run_length)]
    pub duration: Option<Duration>,
    /// Sampling interval with a unit: 1s, 250ms, 10ms.
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = DEFAULT_INTERVAL)]
    pub interval: Duration,
    /// Directory of companion sockets.
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// Also write one CSV row per GPU and per process per sample (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write one JSON line per GPU and per process per sample (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// When the recording ends (its --duration, or SIGINT/SIGTERM), write its HTML report here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Log with levels: each line of stderr starts with its UTC time (RFC 3339) and level,
    /// and lines below LEVEL are dropped: error, warn, or info (where it serves or records,
    /// and why it stopped). Without it, plain lines, none dropped.
    #[arg(long, value_name = "LEVEL", value_enum)]
    pub log_level: Option<crate::fmt::LogLevel>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// The recording to tell.
    pub file: PathBuf,
    /// Where to write it (`-` for stdout; default: next to the recording, NAME.report.html,
    /// or stdout for --format md).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// html: one self-contained page; md: a plain summary for a CI log or a pull request.
    #[arg(long, value_enum, default_value = "html")]
    pub format: crate::report::Format,
    /// Alert thresholds as JSON, as for replay (default: the config file's, else built in).
    #[arg(long, value_name = "FILE")]
    pub alerts_config: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct SnapshotArgs {
    /// table: one line per GPU and per process, for a person; json: everything, for a
    /// script. Default: table when stdout is a terminal, json otherwise (so pipes and
    /// scripts get what they always got).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<SnapshotFormat>,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// What `-1` cannot honour: it prints one snapshot, so a flag of the live view, an output or
/// an alert setting would be dropped in silence.
const ONCE_CONFLICTS: [&str; 16] = [
    "interval",
    "delay",
    "record",
    "record_format",
    "socket_dir",
    "serve",
    "web_config_file",
    "csv",
    "jsonl",
    "headless",
    "alerts_jsonl",
    "exit_on_alert",
    "bell",
    "alerts_config",
    "ascii",
    "no_color",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SnapshotFormat {
    Table,
    Json,
}

impl SnapshotArgs {
    /// The format asked for, else by where stdout goes.
    pub fn format(&self, stdout_is_terminal: bool) -> SnapshotFormat {
        match (self.json, self.format) {
            (true, _) => SnapshotFormat::Json,
            (false, Some(f)) => f,
            (false, None) if stdout_is_terminal => SnapshotFormat::Table,
            (false, None) => SnapshotFormat::Json,
        }
    }
}

/// A watch flag given before a subcommand (`gpumon --ascii replay F`) fills the top-level
/// watch arguments, which that subcommand never reads: the flag would be dropped silently.
/// Returns the first such flag (global ones, `--config`, are every command's).
pub fn flag_before_subcommand(matches: &clap::ArgMatches) -> Option<String> {
    use clap::CommandFactory;
    use clap::parser::ValueSource;
    let (sub, _) = matches.subcommand()?;
    let cmd = Cli::command();
    let arg = cmd.get_arguments().find(|a| {
        !a.is_global_set()
            && matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine)
    })?;
    let flag = arg
        .get_long()
        .map(|l| format!("--{l}"))
        .or_else(|| arg.get_short().map(|c| format!("-{c}")))
        .unwrap_or_else(|| arg.get_id().to_string());
    Some(format!(
        "{flag} is given before '{sub}', which does not read it there: write it after the \
         subcommand (gpumon {sub} {flag} ...; `gpumon {sub} --help` lists what it takes)"
    ))
}

pub const DEFAULT_INTERVAL: &str = "1s";

/// One duration grammar for every flag and config key, humantime's: numbers with units
/// (`ms`, `s`/`sec`, `m`/`min`, `h`, `d`, `w`, and their long forms), alone or added up:
/// `250ms`, `1.5s`, `90s`, `1h30m`, `1h 30m`. A bare number is refused: tools disagree on what
/// it means (nvitop: seconds, nvtop: tenths, btm: milliseconds), so the error names both
/// readings. humantime's errors are rewritten to name the input and the units gpumon
/// documents. `M` is refused: humantime reads it as months, one Shift away from minutes.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    use humantime::DurationError as E;
    let t = s.trim();
    if t.contains('M') {
        return Err(format!(
            "invalid unit 'M' in '{s}': write m for minutes (months are not a unit here)"
        ));
    }
    let d = humantime::parse_duration(t).map_err(|e| match e {
        E::Empty => "empty duration: use a number and a unit, e.g. 250ms, 1s, 1h30m".to_string(),
        E::UnknownUnit { unit, start, .. } if unit.is_empty() => {
            // The number without a unit: the text just before where the unit should be.
            let head = t[..start.min(t.len())].trim_end();
            let num_at = head
                .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map_or(0, |i| i + 1);
            let num = &head[num_at..];
            if num_at == 0 {
                format!("'{s}' has no unit: write {num}s or {num}ms (also m, h, d)")
            } else {
                let next = match head[..num_at].trim_end().chars().last() {
                    Some('h') => "m",
                    Some('m' | 'n') => "s",
                    _ => "ms",
                };
                format!("'{s}': {num} has no unit: write e.g. {head}{next} (units: ms, s, m, h, d)")
            }
        }
        E::UnknownUnit { unit, .. } => {
            format!("invalid unit '{unit}' in '{s}': use ms, s, m, h or d (or a sum: 1h30m)")
        }
        E::NumberOverflow => format!("duration '{s}' is longer than a year"),
        e => format!(
            "invalid duration '{s}' ({e}): use a number and a unit, e.g. 250ms, 1s, 10m, 1h30m"
        ),
    })?;
    if d > Duration::from_secs(366 * 86_400) {
        return Err(format!("duration '{s}' is longer than a year"));
    }
    Ok(d)
}

/// A sampling interval: a duration from 10 ms to one hour.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(10) {
        return Err(format!("interval '{s}' is below the 10 ms minimum"));
    }
    if d > Duration::from_secs(3600) {
        return Err(format!("interval '{s}' is above one hour"));
    }
    Ok(d)
}

/// `-d`: htop and nvtop read a bare number as tenths of a second, and both agree, so `-d`
/// does too; anything else is an interval with its unit.
pub fn parse_delay(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let tenths: u64 = t
            .parse()
            .map_err(|_| format!("delay '{s}' is above one hour"))?;
        let d = Duration::from_millis(tenths.saturating_mul(100));
        if d.is_zero() {
            return Err(format!(
                "delay '{s}' is below the 10 ms minimum (-d counts tenths of a second: -d 10 is 1s)"
            ));
        }
        if d > Duration::from_secs(3600) {
            return Err(format!(
                "delay '{s}' is above one hour (-d counts tenths of a second: -d 10 is 1s)"
            ));
        }
        return Ok(d);
    }
    parse_interval(s)
}

/// How long to record: any positive duration.
pub fn parse_run_length(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("duration '{s}' must be longer than zero"));
    }
    Ok(d)
}

/// A GPU as `--gpu` names it: an NVML index or (a prefix of) a UUID.
pub fn parse_gpu_id(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.parse::<u32>().is_ok() || t.len() >= 4 {
        Ok(t.to_string())
    } else {
        Err(format!(
            "'{s}' is neither a GPU index nor a GPU UUID (e.g. 0 or GPU-3f2a...)"
        ))
    }
}

pub fn parse_severity(s: &str) -> Result<crate::model::alerts::Severity, String> {
    crate::model::alerts::Severity::parse(s)
        .ok_or_else(|| format!("invalid severity '{s}': use info, warning or critical"))
}

/// `--node`: a label value people type and read: no control characters, not blank.
fn parse_node(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("a node name cannot be empty".into());
    }
    if t.chars().any(char::is_control) || t.len() > 253 {
        return Err(
            "a node name is at most 253 characters, none of them control characters".into(),
        );
    }
    Ok(t.to_string())
}

/// `--listen` / `--serve` address: `:PORT` (loopback: a metrics port is opened to the network
/// only when asked), `HOST:PORT`, `[::1]:PORT`, or a name (`localhost:19464`) resolved now so a
/// typo fails at once. A name with several addresses binds the first, IPv4 first.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let hint = || {
        format!("invalid address '{s}': use :PORT, HOST:PORT or [IPv6]:PORT, e.g. 127.0.0.1:19464")
    };
    let t = s.trim();
    if let Some(port) = t.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| hint())?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(hint)?;
    let port: u16 = port.parse().map_err(|_| hint())?;
    // The resolver takes `0`, `127.1` or `2130706433` as IPv4 addresses (`0:19464` bound
    // every interface): a host of digits and dots must be a whole dotted quad.
    if !host.is_empty() && host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!(
            "invalid address '{s}': '{host}' is not a whole IPv4 address; write all four \
             parts (0.0.0.0:{port} listens on every interface, :{port} on loopback)"
        ));
    }
    let mut addrs: Vec<SocketAddr> = (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{host}' in '{s}': {e}"))?
        .collect();
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| format!("'{host}' has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_interval("5ms").is_err());
        assert!(parse_interval("2h").is_err(), "above one hour");
        assert!(parse_interval("fast").is_err());
    }

    #[test]
    fn delay_reads_tenths_as_htop_and_nvtop_do() {
        assert_eq!(parse_delay("10"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_delay("5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_delay("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_delay("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_delay("36000"), Ok(Duration::from_secs(3600)));
        assert!(parse_delay("0").expect_err("zero").contains("tenths"));
        assert!(parse_delay("36001").is_err());
        assert!(parse_delay("99999999999999999999999").is_err());
        // A decimal is no htop delay: it needs its unit, as everywhere else.
        assert!(
            parse_delay("1.5")
                .expect_err("bare decimal")
                .contains("1.5s")
        );
    }

    #[test]
    fn a_bare_number_is_refused_with_the_units_it_could_mean() {
        let e = parse_interval("10").expect_err("no unit");
        assert!(e.contains("10s or 10ms"), "{e}");
        let e = parse_run_length("60").expect_err("no unit");
        assert!(e.contains("60s"), "{e}");
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn durations_share_one_grammar() {
        assert_eq!(parse_run_length("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_run_length("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_run_length("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_run_length("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_run_length("1.5 h"), Ok(Duration::from_secs(5400)));
        assert!(parse_run_length("0s").is_err());
        assert!(parse_run_length("400d").is_err());
    }

    #[test]
    fn compound_durations_add_up() {
        assert_eq!(parse_run_length("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_run_length("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_run_length("2d12h"), Ok(Duration::from_secs(216_000)));
        assert_eq!(parse_run_length("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_run_length("1m 0.5s"),
            Ok(Duration::from_millis(60_500))
        );
        assert_eq!(parse_interval("1s250ms"), Ok(Duration::from_millis(1250)));
        assert_eq!(parse_interval("1min30s"), Ok(Duration::from_secs(90)));
        // The unit hint survives inside a compound: a trailing bare number names its likely unit.
        let e = parse_run_length("1h30").expect_err("trailing bare number");
        assert!(e.contains("write e.g. 1h30m"), "{e}");
        let e = parse_run_length("2m 30").expect_err("trailing bare number");
        assert!(e.contains("write e.g. 2m 30s"), "{e}");
        let e = parse_run_length("1.5").expect_err("bare decimal");
        assert!(e.contains("write 1.5s or 1.5ms"), "{e}");
        for bad in ["1h-30m", "1h30x", "h", "", "  ", "1h 30 m x", "2M", "1S"] {
            assert!(parse_run_length(bad).is_err(), "{bad:?} accepted");
        }
        let e = parse_run_length("2M").expect_err("months");
        assert!(e.contains("write m for minutes"), "{e}");
        let e = parse_run_length("1h30x").expect_err("unit");
        assert!(e.contains("invalid unit 'x'"), "{e}");
        assert!(parse_run_length("300d100d").is_err(), "past a year");
        assert!(parse_run_length("99999999999999999999h").is_err());
    }

    #[test]
    fn listen_addresses() {
        let a = |s: &str| parse_addr(s).map(|a| a.to_string());
        assert_eq!(a(":19464"), Ok("127.0.0.1:19464".into()));
        assert_eq!(a("0.0.0.0:19464"), Ok("0.0.0.0:19464".into()));
        assert_eq!(a("[::1]:19464"), Ok("[::1]:19464".into()));
        let local = parse_addr("localhost:19464").expect("resolves");
        assert!(local.ip().is_loopback() && local.port() == 19464);
        assert!(parse_addr("19464").is_err());
        assert!(parse_addr(":99999").is_err());
        assert!(parse_addr("no-such-host.invalid:1").is_err());
        // `0:19464` would bind every interface, so shorthand quads are refused.
        for short in ["0:19464", "127.1:19464", "2130706433:19464"] {
            let e = parse_addr(short).expect_err(short);
            assert!(e.contains("0.0.0.0:19464"), "{e}");
        }
    }

    #[test]
    fn htop_and_nvitop_short_flags() {
        let cli = Cli::try_parse_from(["gpumon", "-d", "5", "-u", "alice,bob", "-p", "7,9"])
            .expect("parses");
        assert_eq!(cli.watch.delay, Some(Duration::from_millis(500)));
        assert_eq!(cli.watch.filter.user, ["alice", "bob"]);
        assert_eq!(cli.watch.filter.pid, [7, 9]);
        let e = Cli::try_parse_from(["gpumon", "-d", "10", "-i", "1s"]).expect_err("two delays");
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        for sub in [&["replay", "x"][..], &["record"], &["serve"], &["watch"]] {
            let mut args = vec!["gpumon"];
            args.extend_from_slice(sub);
            args.extend(["-u", "root", "-p", "1"]);
            Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn once_is_a_filtered_snapshot() {
        let mut cli = Cli::try_parse_from(["gpumon", "-1", "-u", "alice"]).expect("parses");
        cli.once_as_snapshot();
        let Some(Command::Snapshot(s)) = &cli.command else {
            panic!("{:?}", cli.command);
        };
        assert_eq!((s.format, s.json), (None, false));
        assert_eq!(s.filter.user, ["alice"]);
        let mut cli = Cli::try_parse_from(["gpumon", "watch", "--once"]).expect("parses");
        cli.once_as_snapshot();
        assert!(matches!(cli.command, Some(Command::Snapshot(_))));
        // Without it, nothing changes.
        let mut cli = Cli::try_parse_from(["gpumon", "watch"]).expect("parses");
        cli.once_as_snapshot();
        assert!(matches!(cli.command, Some(Command::Watch(_))));
        // What one snapshot cannot honour is refused, not dropped.
        for flag in [
            &["--record", "r"][..],
            &["--serve", ":1"],
            &["--headless"],
            &["-d", "5"],
        ] {
            let mut args = vec!["gpumon", "-1"];
            args.extend_from_slice(flag);
            let e = Cli::try_parse_from(&args).expect_err("conflict");
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{args:?}"
            );
        }
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
