//! Command line. `gpumon` alone watches live (or plays the bundled recording without a GPU).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::event::Speed;

#[derive(Debug, Parser)]
#[command(name = "gpumon", version, about = "Live terminal GPU memory monitor", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub watch: WatchArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch live GPUs in the terminal (the default).
    Watch(WatchArgs),
    /// Play a recording in the TUI (or headless).
    Replay(ReplayArgs),
    /// Sample headless into a recording file.
    Record(RecordArgs),
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
}

#[derive(Debug, Args, Clone, Default)]
pub struct DemoArgs {
    /// Which recording: `list` prints them; without a name, the richest one.
    pub name: Option<String>,
    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct DisplayArgs {
    /// Draw with ASCII only (automatic when the locale is not UTF-8).
    #[arg(long, global = true)]
    pub ascii: bool,
    /// No colours (also when NO_COLOR is set).
    #[arg(long, global = true)]
    pub no_color: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct WatchArgs {
    /// Sampling interval: 1s, 250ms, 10ms (minimum 10 ms; a bare number is milliseconds).
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Also record everything to this file while watching.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Directory of companion sockets (default: $GPUMON_DIR, $XDG_RUNTIME_DIR/gpumon, /tmp/gpumon-UID).
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub display: DisplayArgs,
}

/// Outputs every mode can feed: metrics endpoint, flat logs, alerts.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Also serve Prometheus metrics on this address (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub serve: Option<SocketAddr>,
    /// Write one CSV row per GPU and per process per sample.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write one JSON line per GPU and per process per sample.
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
    /// Alert thresholds as JSON; missing fields keep their defaults
    /// (all of them: assets/alerts-config.json, explained in docs/alerts.md).
    #[arg(long, value_name = "FILE")]
    pub alerts_config: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on; loopback unless told otherwise.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = crate::export::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Serve a recording instead of live GPUs (played at --speed, then held at its end).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Replay speed for --replay.
    #[arg(long, value_parser = Speed::parse, default_value = "max")]
    pub speed: Speed,
    /// Sampling interval when live.
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Directory of companion sockets.
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ReplayArgs {
    /// The recording to play.
    pub file: PathBuf,
    /// Playback speed: a factor (1, 10, 0.5) or `max` to jump to the end.
    #[arg(long, value_parser = Speed::parse, default_value = "1")]
    pub speed: Speed,
    /// Keep reading as the file grows (attach to a running `gpumon record`).
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub display: DisplayArgs,
}

#[derive(Debug, Args, Clone)]
pub struct RecordArgs {
    /// Output file (NDJSON recording).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long, value_name = "S", value_parser = parse_duration_s)]
    pub duration: Option<f64>,
    /// Sampling interval: 1s, 250ms, 10ms (a bare number is milliseconds).
    #[arg(long, short = 'i', value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Directory of companion sockets.
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// Also write one CSV row per GPU and per process per sample.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write one JSON line per GPU and per process per sample.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct SnapshotArgs {
    /// JSON output (the only format for now; kept explicit for scripts).
    #[arg(long)]
    pub json: bool,
}

pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1000.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid interval '{s}': use e.g. 1s, 250ms or 10ms"))?;
    let ms = v * mult;
    if !ms.is_finite() || ms < 10.0 {
        return Err(format!("interval '{s}' is below the 10 ms minimum"));
    }
    if ms > 3_600_000.0 {
        return Err(format!("interval '{s}' is above one hour"));
    }
    Ok(Duration::from_micros((ms * 1000.0) as u64))
}

pub fn parse_duration_s(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration '{s}': seconds, e.g. 60 or 0.5"))?;
    if !(v.is_finite() && v > 0.0 && v <= 366.0 * 86_400.0) {
        return Err(format!(
            "duration '{s}' must be between 0 and one year of seconds"
        ));
    }
    Ok(v)
}

pub fn parse_severity(s: &str) -> Result<crate::model::alerts::Severity, String> {
    crate::model::alerts::Severity::parse(s)
        .ok_or_else(|| format!("invalid severity '{s}': use info, warning or critical"))
}

/// `--listen` style address check shared by serve flags.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("invalid address '{s}': use HOST:PORT, e.g. 127.0.0.1:9464"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("10"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_interval("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_interval("5ms").is_err());
        assert!(parse_interval("fast").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
