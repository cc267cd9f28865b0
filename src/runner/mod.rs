//! Wiring: which sources run, the one event loop, and the headless modes.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc::Sender;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::channel::ChannelHandle;
use crate::cli::{Cli, Command, DisplayArgs, OutputArgs, ReplayArgs};
use crate::export::flat::{FlatFormat, FlatLog};
use crate::export::http::{Limits, serve_with};
use crate::export::web_config::WebConfig;
use crate::export::{Exporter, LineFile};
use crate::model::alerts::config::AlertConfig;
use crate::model::alerts::engine::AlertEngine;
use crate::model::time::now_ms;
use crate::pipeline::{Pipeline, Sinks};
use crate::record::Recorder;
use crate::settings::Settings;
use crate::source::event::Event;
use crate::source::nvml;
use crate::source::replay::Speed;
use crate::tui::ui::theme::Theme;

/// Events queued between sources and the loop; sources wait (NVML, replay) when it is full.
const QUEUE: usize = 1024;
/// Redraw caps: after a key, and after new data only. Live data redraws once a second
/// whatever the sampling interval (as nvtop does by default): faster sampling exists to catch
/// short peaks, which the model keeps without a redraw, and a redraw costs more than a tick
/// (bench/monitor_overhead.sh). A replay played faster than real time redraws 4 times a
/// second so it still reads like a video.
const INPUT_FRAME: Duration = Duration::from_millis(16);
const LIVE_DATA_FRAME: Duration = Duration::from_secs(1);
const REPLAY_DATA_FRAME: Duration = Duration::from_millis(250);
/// A frame may be drawn up to 1/EARLY of its cap early (`tui::event_loop`).
const EARLY: u32 = 4;

mod completions;
mod demos;
mod fault_pages;
mod fleet;
mod headless;
pub mod man;
mod monitoring;
mod report;
mod threads;
mod tui;

pub use fault_pages::one_page_per_fault;
use fleet::*;
use headless::*;
use threads::*;
use tui::*;

/// Where the default bundled recording (a real 2-GPU H200 run) lives.
pub fn demo_path() -> Option<PathBuf> {
    demos::find(None).ok().map(|(_, p)| p)
}

/// Runs the command; `settings` are the configuration file's (main.rs loads them).
pub fn main_entry(cli: Cli, settings: &Settings) -> Result<i32> {
    match run_command(cli, settings) {
        // The reader of stdout went away before gpumon was done (`| head -1`): it has what
        // it wanted, and gpumon ends quietly, as other Unix tools do.
        Err(e) if e.is::<StdoutClosed>() => Ok(0),
        done => done,
    }
}

/// A write to stdout found its reader gone (a broken pipe).
#[derive(Debug, thiserror::Error)]
#[error("stdout closed by its reader")]
struct StdoutClosed;

fn run_command(cli: Cli, settings: &Settings) -> Result<i32> {
    let log_level = match &cli.command {
        Some(Command::Serve(s)) => s.log_level,
        Some(Command::Record(r)) => r.log_level,
        _ => None,
    };
    if let Some(level) = log_level {
        crate::fmt::set_log_level(level);
    }
    match &cli.command {
        Some(Command::Run { cmd }) => return crate::launch::run(cmd),
        Some(Command::Config(c)) => return crate::config::command(c, cli.config.as_deref()),
        Some(Command::Completions { shell }) => return print_all(&completions::script(*shell)),
        Some(Command::Dashboard(d)) => return monitoring::command(d),
        Some(Command::Man(m)) => {
            let Some(dir) = &m.dir else {
                return print_all(&man::main_page()?);
            };
            let written: String = man::write_all(dir)?
                .iter()
                .map(|p| format!("{}\n", p.display()))
                .collect();
            return print_all(written.as_bytes());
        }
        _ => {}
    }
    if let Some(Command::Snapshot(s)) = &cli.command {
        return snapshot(s);
    }
    // The report waits on its replay thread: it runs before (outside) the async runtime.
    if let Some(Command::Report(r)) = &cli.command {
        return report::report(r, settings);
    }
    // One thread runs the loop and the channel/HTTP tasks; samplers have their own threads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        match cli.command {
            None => watch(cli.watch, settings).await,
            Some(Command::Watch(w)) => watch(w, settings).await,
            Some(Command::Replay(r)) if r.out.headless => replay_headless(r, settings).await,
            Some(Command::Replay(r)) => replay_tui(r, false, None, settings).await,
            Some(Command::Demo(d)) if d.name.as_deref() == Some("list") => {
                crate::fmt::print_stdout(demos::list().as_bytes())?;
                Ok(0)
            }
            Some(Command::Demo(d)) => {
                if let Some(n) = d.name.as_deref().filter(|n| !demos::is_known(n)) {
                    let text = format!("no bundled recording named '{n}'\n\n{}", demos::list());
                    return Err(crate::cli::UsageError(text).into());
                }
                let (demo, file) = demos::find(d.name.as_deref()).map_err(anyhow::Error::msg)?;
                let args = ReplayArgs {
                    file,
                    speed: Some(Speed::Times(1.0)),
                    follow: false,
                    strict: false,
                    filter: Default::default(),
                    out: OutputArgs::default(),
                    display: d.display,
                };
                let note = format!(
                    "demo '{}': a recorded H200 run, replayed in a loop (gpumon demo list)",
                    demo.name
                );
                replay_tui(args, true, Some(note), settings).await
            }
            Some(Command::Record(r)) => record(r, settings).await,
            Some(Command::Serve(s)) => serve(s).await,
            Some(Command::Snapshot(_))
            | Some(Command::Report(_))
            | Some(Command::Run { .. })
            | Some(Command::Config(_))
            | Some(Command::Completions { .. })
            | Some(Command::Dashboard(_))
            | Some(Command::Man(_)) => Ok(0),
        }
    })
}

/// Write generated text to stdout; a reader that stops early (`gpumon man | head`) is not an
/// error. (The generators are given a buffer because clap_complete panics on a write error.)
fn print_all(text: &[u8]) -> Result<i32> {
    crate::fmt::print_stdout(text)?;
    Ok(0)
}

pub(super) fn theme(d: &DisplayArgs, settings: &Settings) -> Theme {
    let mut t = Theme::detect(d.ascii, d.no_color);
    if let Some(utc) = settings.utc {
        t.utc = utc;
    }
    t
}

/// `--gpu/--user/--pid` for this pipeline.
/// The pipeline every mode runs: its sinks, alert thresholds and filter, configured once.
pub(super) async fn pipeline(
    out: &OutputArgs,
    recorder: Option<Recorder>,
    filter: &crate::cli::FilterArgs,
    settings: &Settings,
) -> Result<Pipeline> {
    let mut pipe = Pipeline::new(sinks(out, recorder).await?);
    configure(&mut pipe, out, settings)?;
    set_filter(&mut pipe, filter)?;
    Ok(pipe)
}

/// How both loops end on `--exit-on-alert`: say which alert fired, exit with `ALERT`.
pub(super) fn alert_exit(pipe: &Pipeline) -> Option<i32> {
    let a = pipe.tripped.as_ref()?;
    crate::say!(
        "gpumon: alert fired ({}): {}",
        a.severity.label(),
        a.message
    );
    Some(crate::cli::exit::ALERT)
}

/// Live modes refuse a filter that matches nothing on start, before any output is created:
/// a `--gpu` no GPU here answers to (or a UUID prefix several do), a `--user` this machine
/// does not know, a `--pid` that is not running. A replay only warns (the pipeline's filter
/// notices): a recording may come from another machine.
pub(super) fn check_live_filter(
    f: &crate::cli::FilterArgs,
    gpus: &[crate::model::sample::GpuInfo],
) -> Result<()> {
    let usage = |m: String| anyhow::Error::new(crate::cli::UsageError(m));
    let filter = new_filter(f)?;
    filter.check_gpus(gpus).map_err(usage)?;
    for u in &f.user {
        let u = u.trim();
        if u.parse::<u32>().is_err() && crate::source::procfs::user_id(u).is_none() {
            return Err(usage(format!("--user {u}: no such user on this machine")));
        }
    }
    for p in &f.pid {
        if !Path::new(&format!("/proc/{p}")).exists() {
            return Err(usage(format!("--pid {p}: no such process")));
        }
    }
    Ok(())
}

pub(super) fn set_filter(pipe: &mut Pipeline, f: &crate::cli::FilterArgs) -> Result<()> {
    pipe.filter = new_filter(f)?;
    Ok(())
}

/// `--user 1000` matches the name /proc gives that uid here.
pub(super) fn new_filter(f: &crate::cli::FilterArgs) -> Result<crate::pipeline::filter::Filter> {
    crate::pipeline::filter::Filter::new(&f.gpu, &f.user, &f.pid, crate::source::procfs::user_name)
}

/// Build the outputs named on the command line. The HTTP listener is bound here so a
/// busy port is an immediate, clear error.
pub(super) async fn sinks(out: &OutputArgs, recorder: Option<Recorder>) -> Result<Sinks> {
    let host = nvml::hostname();
    let mut s = Sinks {
        recorder,
        ..Sinks::default()
    };
    if let Some(addr) = out.serve {
        let web = web_config(out.web_config_file.as_deref())?;
        s.exporter = Some(start_exporter(addr, &host, out.node.clone(), web).await?);
    }
    if out.csv.is_some() || out.jsonl.is_some() || out.alerts_jsonl.is_some() {
        // Past `ulimit -f` a write then fails with EFBIG, reported like any other.
        crate::record::ignore_sigxfsz();
    }
    for (p, format) in [(&out.csv, FlatFormat::Csv), (&out.jsonl, FlatFormat::Jsonl)] {
        let Some(p) = p else { continue };
        let log = if p.as_os_str() == "-" {
            // The CSV header is written here: a reader already gone is found now.
            FlatLog::new(Box::new(io::stdout()), format, host.clone()).map_err(|e| {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    anyhow::Error::new(StdoutClosed)
                } else {
                    anyhow::Error::new(e).context("cannot write stdout")
                }
            })?
        } else {
            FlatLog::create(p, format, host.clone())
                .with_context(|| format!("cannot write {}", p.display()))?
        };
        s.flat.push(log);
    }
    if let Some(p) = &out.alerts_jsonl {
        s.alerts_out = Some(if p.as_os_str() == "-" {
            LineFile::new(Box::new(io::stdout()), "stdout")
        } else {
            LineFile::create(p).with_context(|| format!("cannot write {}", p.display()))?
        });
    }
    Ok(s)
}

/// Alert thresholds (`--alerts-config FILE`, JSON, missing fields keep their defaults,
/// unknown ones are an error; else the config file's `[alerts]`) and `--exit-on-alert`.
pub(super) fn configure(pipe: &mut Pipeline, out: &OutputArgs, settings: &Settings) -> Result<()> {
    pipe.exit_on = out.exit_on_alert;
    if let Some(p) = &out.alerts_config {
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("cannot read alert configuration {}", p.display()))?;
        let cfg: AlertConfig = serde_json::from_str(&text).map_err(|e| {
            crate::cli::UsageError(format!(
                "invalid alert configuration {}: {}",
                p.display(),
                crate::config::did_you_mean(&e.to_string())
            ))
        })?;
        cfg.check().map_err(|e| {
            crate::cli::UsageError(format!("invalid alert configuration {}: {e}", p.display()))
        })?;
        pipe.alerts = AlertEngine::new(cfg);
    } else if let Some(cfg) = &settings.alerts {
        pipe.alerts = AlertEngine::new(cfg.clone());
    }
    Ok(())
}

/// `--web-config-file`, read and checked now: a file that cannot be honoured in full is a
/// usage error before anything listens.
pub(super) fn web_config(path: Option<&Path>) -> Result<Arc<WebConfig>> {
    Ok(Arc::new(match path {
        Some(p) => WebConfig::load(p).map_err(crate::cli::UsageError)?,
        None => WebConfig::default(),
    }))
}

/// `http` or `https`, for the lines that say where metrics are served.
pub(super) fn scheme(web: &WebConfig) -> &'static str {
    if web.tls.is_some() { "https" } else { "http" }
}

pub(super) async fn start_exporter(
    addr: SocketAddr,
    host: &str,
    node: Option<String>,
    web: Arc<WebConfig>,
) -> Result<Arc<Exporter>> {
    let exporter = Arc::new(Exporter::new(host.to_string()).named(node));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    if addr.port() == 0 {
        // Port 0 asks the system for one: say which it gave, or nobody can scrape it.
        let got = listener.local_addr().map_or(addr, |a| a);
        crate::say_info!(
            "gpumon: serving metrics on {}://{got}/metrics",
            scheme(&web)
        );
    }
    let e = Arc::clone(&exporter);
    tokio::spawn(async move {
        if let Err(err) = serve_with(e, listener, Limits::default(), web).await {
            crate::say!("gpumon: metrics endpoint stopped: {err}");
        }
    });
    Ok(exporter)
}

/// Live sources: NVML (when there is a driver) and the companion channel (always).
/// Returns the header, or why NVML is unavailable, plus the channel handle to keep alive.
/// Both send into the loop's one queue `tx`.
pub(super) fn start_live<I: Send + 'static>(
    interval: Duration,
    socket_dir: Option<PathBuf>,
    tx: &Sender<Event<I>>,
) -> (
    Result<crate::model::frame::Header, nvml::NvmlUnavailable>,
    ChannelHandle,
) {
    let header = nvml::spawn(interval, tx.clone());
    let channel = crate::channel::spawn(socket_dir, tx.clone());
    (header, channel)
}

/// Start recording to `path` (`None`: a name from the host and the start time, in the
/// current directory). A compressed file under a name that does not say so is written
/// anyway (readers go by its first bytes), with a word about it.
pub(super) fn start_recorder(
    path: Option<&Path>,
    header: &crate::model::frame::Header,
    format: crate::record::Format,
) -> Result<(Recorder, PathBuf)> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(default_recording_name(header, format)),
    };
    let gz_name = path.extension().is_some_and(|e| e == "gz");
    // Not for a device (`/dev/null`) or a pipe, which have no name to mislead.
    let device = std::fs::metadata(&path).is_ok_and(|m| !m.is_file());
    if format == crate::record::Format::Gzip && !gz_name && !device {
        eprintln!(
            "gpumon: {}: writing a gzip-compressed recording (--format ndjson writes plain text)",
            path.display()
        );
    }
    Ok((Recorder::create(&path, header, format)?, path))
}

/// `HOST-YYYYmmdd-HHMMSS.gpumon.jsonl.gz`, in local time, the host cut to safe characters.
fn default_recording_name(
    header: &crate::model::frame::Header,
    format: crate::record::Format,
) -> String {
    let host: String = header
        .host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    let host = if host.is_empty() {
        "gpumon".into()
    } else {
        host
    };
    let when = chrono::Local::now().format("%Y%m%d-%H%M%S");
    format!("{host}-{when}{}", format.extension())
}

/// A header for runs without NVML: companions are still served and recorded.
pub(super) fn header_without_gpus(interval: Duration) -> crate::model::frame::Header {
    crate::model::frame::Header {
        v: crate::model::frame::FORMAT_VERSION,
        format: "gpumon".into(),
        host: nvml::hostname(),
        driver_version: None,
        nvml_version: None,
        cuda_version: None,
        started: now_ms(),
        interval_ms: interval.as_millis() as u64,
        gpus: vec![],
        gpumon_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Whether any companion or interposer socket exists where the channel looks.
pub(super) fn companions_waiting(dir: Option<&Path>) -> bool {
    let dirs = match dir {
        Some(d) => vec![d.to_path_buf()],
        None => crate::channel::dirs::scan_dirs(&Default::default())
            .into_iter()
            .map(|d| d.path)
            .collect(),
    };
    // Bounded like a scan: a directory full of other names is not read to its end.
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.take(crate::channel::scan_share()))
        .flatten()
        .any(|e| crate::channel::dirs::sock_pid(&e.file_name()).is_some())
}
