//! The configuration file, `$XDG_CONFIG_HOME/gpumon/config.toml` (or `--config FILE`):
//! preferences that would otherwise be flags on every start. Flags given on the command line
//! win; the file fills in the rest; built-in defaults fill what neither sets. Unknown or
//! misspelt keys are an error that names the key and the closest valid one, here and in
//! `--alerts-config`, because a silently ignored threshold is worse than no config at all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ArgMatches;
use clap::parser::ValueSource;
use serde::Deserialize;

use crate::cli::{Cli, Command, DisplayArgs};
use crate::model::alerts::config::AlertConfig;
use crate::settings::{ExtraColumns, Settings, StartSort, StartView, ZOOMS};
// The zoom steps' names, to refuse a window the TUI has no step for when the file is read.

/// Every key the file may hold. All optional: an empty file is valid.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Sampling interval (watch, record, serve), e.g. "1s", "250ms".
    pub interval: Option<String>,
    /// Draw with ASCII only.
    pub ascii: Option<bool>,
    /// Colours on (false = like --no-color / NO_COLOR).
    pub color: Option<bool>,
    /// Clock times in UTC instead of local time.
    pub utc: Option<bool>,
    /// The view the TUI opens with: "overview", "detail" or "alerts".
    pub view: Option<String>,
    /// The span charts open with: a zoom step, "all" or "10s" … "7d" (unset: "all" for a
    /// replay, "5m" live).
    pub window: Option<String>,
    /// The process lists' sort column: "used", "peak", "growth", "pid" or "name".
    pub sort: Option<String>,
    /// The process lists' optional columns (SM%, CPU%, RSS, TIME, CONTAINER): "auto", "on"
    /// or "off".
    pub columns: Option<String>,
    /// Directory of companion sockets.
    pub socket_dir: Option<PathBuf>,
    /// Address `gpumon serve` listens on; the same forms as `--listen`.
    pub listen: Option<String>,
    /// How long an exited process stays listed: a duration ("10m", "1h") or "run" (until
    /// gpumon stops). Unset: 10 minutes live, the rest of the recording in a replay.
    pub keep_exited: Option<String>,
    /// The name `gpumon serve` gives this node in every series (`--node`).
    pub node: Option<String>,
    /// The cluster view's Prometheus (`--prometheus` and its flags).
    pub prometheus: Option<PromConfig>,
    /// Alert thresholds: the same keys as the JSON of `--alerts-config` (docs/alerts.md).
    pub alerts: Option<AlertConfig>,
}

/// `[prometheus]`: where the cluster view reads the fleet, for the machine people watch it
/// from. With `url` set, a plain `gpumon` opens the node list.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromConfig {
    pub url: Option<String>,
    pub http_config: Option<PathBuf>,
    pub refresh: Option<String>,
    pub timeout: Option<String>,
    #[serde(rename = "match")]
    pub selector: Option<String>,
}

/// Values checked once at load, so a bad value is reported with its key before anything
/// starts. `apply` fills the flags from it; `settings` is handed to the modes (main.rs).
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub file: Config,
    pub interval: Option<Duration>,
    /// `[prometheus]` refresh and timeout, checked.
    pub prom_refresh: Option<Duration>,
    pub prom_timeout: Option<Duration>,
    pub listen: Option<std::net::SocketAddr>,
    pub settings: Settings,
}

/// `gpumon config`: print the default file, the path, or check the file in use.
pub fn command(args: &crate::cli::ConfigArgs, explicit: Option<&Path>) -> Result<i32> {
    if args.print_default {
        crate::fmt::print_stdout(default_text().as_bytes())?;
        return Ok(0);
    }
    let path = explicit.map(Path::to_path_buf).or_else(default_path);
    if args.path {
        match &path {
            Some(p) => crate::fmt::print_stdout(format!("{}\n", p.display()).as_bytes())?,
            None => bail!("neither XDG_CONFIG_HOME nor HOME is set"),
        }
        return Ok(0);
    }
    load(explicit)?;
    let said = match path {
        Some(p) if p.is_file() => format!("{}: valid\n", p.display()),
        Some(p) => format!("{}: not present (built-in defaults)\n", p.display()),
        None => "no configuration path (neither XDG_CONFIG_HOME nor HOME is set)\n".into(),
    };
    crate::fmt::print_stdout(said.as_bytes())?;
    Ok(0)
}

/// Where the file is looked for when `--config` is not given.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("gpumon").join("config.toml"))
}

/// Load `--config FILE` (must exist) or the default path (may be absent).
pub fn load(explicit: Option<&Path>) -> Result<Resolved> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => match default_path() {
            Some(p) => (p, false),
            None => return Ok(Resolved::default()),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Resolved::default());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    parse(&text).with_context(|| format!("invalid configuration {}", path.display()))
}

pub fn parse(text: &str) -> Result<Resolved> {
    let file: Config =
        toml::from_str(text).map_err(|e| anyhow::anyhow!(did_you_mean(&e.to_string())))?;
    if let Ok(table) = text.parse::<toml::Table>() {
        non_finite(&toml::Value::Table(table), "")?;
    }
    if let Some(a) = &file.alerts {
        a.check().map_err(|e| anyhow::anyhow!("alerts.{e}"))?;
    }
    let interval = file
        .interval
        .as_deref()
        .map(crate::cli::parse_interval)
        .transpose()
        .map_err(|e| anyhow::anyhow!("interval: {e}"))?;
    let view = match file.view.as_deref() {
        None => None,
        Some(v) => match StartView::NAMES.iter().find(|(n, _)| *n == v) {
            Some((_, view)) => Some(*view),
            None => bail!(
                "view: '{v}' is not a view{}; use overview, detail or alerts",
                closest(v, &StartView::NAMES.map(|(n, _)| n))
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_default()
            ),
        },
    };
    let zoom = match file.window.as_deref() {
        None => None,
        Some(w) => Some(ZOOMS.iter().position(|(_, l)| *l == w).with_context(|| {
            let all: Vec<&str> = ZOOMS.iter().map(|(_, l)| *l).collect();
            format!(
                "window: '{w}' is not a zoom step; use one of {}",
                all.join(", ")
            )
        })?),
    };
    let sort = match file.sort.as_deref() {
        None => None,
        Some(v) => match StartSort::NAMES.iter().find(|(n, _)| *n == v) {
            Some((_, k)) => Some(*k),
            None => bail!(
                "sort: '{v}' is not a sort column{}; use used, peak, growth, pid or name",
                closest(v, &StartSort::NAMES.map(|(n, _)| n))
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_default()
            ),
        },
    };
    let columns = match file.columns.as_deref() {
        None => None,
        Some(v) => match ExtraColumns::NAMES.iter().find(|(n, _)| *n == v) {
            Some((_, c)) => Some(*c),
            None => bail!("columns: '{v}' is not a mode; use auto, on or off"),
        },
    };
    let listen = file
        .listen
        .as_deref()
        .map(crate::cli::parse_addr)
        .transpose()
        .map_err(|e| anyhow::anyhow!("listen: {e}"))?;
    let keep_exited = match file.keep_exited.as_deref() {
        None => None,
        Some("run") => Some(None),
        Some(v) => Some(Some(
            crate::cli::parse_run_length(v)
                .map_err(|e| {
                    anyhow::anyhow!("keep_exited: {e}; or \"run\" to keep it until gpumon stops")
                })?
                .as_millis() as i64,
        )),
    };
    let prom = file.prometheus.clone().unwrap_or_default();
    if let Some(m) = &prom.selector {
        crate::model::fleet::Selector::parse(m)
            .map_err(|e| anyhow::anyhow!("prometheus.match: {e}"))?;
    }
    let dur = |v: &Option<String>, key: &str| {
        v.as_deref()
            .map(crate::cli::parse_interval)
            .transpose()
            .map_err(|e| anyhow::anyhow!("prometheus.{key}: {e}"))
    };
    let prom_refresh = dur(&prom.refresh, "refresh")?;
    let prom_timeout = dur(&prom.timeout, "timeout")?;
    let settings = Settings {
        view,
        zoom,
        sort,
        columns,
        keep_exited,
        utc: file.utc,
        alerts: file.alerts.clone(),
    };
    Ok(Resolved {
        file,
        interval,
        prom_refresh,
        prom_timeout,
        listen,
        settings,
    })
}

/// `nan` and `inf` are TOML floats, and every threshold compared with one is silently
/// never (or always) crossed: `alpha = nan` passed as valid and cut the demo's growth
/// alerts from 4 to 1. Refused wherever they appear, naming the key.
fn non_finite(v: &toml::Value, key: &str) -> Result<()> {
    match v {
        toml::Value::Float(f) if !f.is_finite() => {
            bail!("{key}: {f} is not a usable number; thresholds take finite values")
        }
        toml::Value::Table(t) => {
            for (k, v) in t {
                let path = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                non_finite(v, &crate::fmt::quote(&path))?;
            }
        }
        toml::Value::Array(a) => {
            for v in a {
                non_finite(v, key)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Fill every setting the command line left at its default from the file. `matches` tells
/// which values were typed (clap's `ValueSource`), so a flag equal to a default still wins.
pub fn apply(cfg: &Resolved, cli: &mut Cli, matches: &ArgMatches) {
    let (sub, typed) = match (cli.command.as_mut(), matches.subcommand()) {
        (Some(c), Some((_, m))) => (Some(c), m),
        _ => (None, matches),
    };
    let given = |id: &str| {
        typed.try_contains_id(id).is_ok()
            && typed.value_source(id) == Some(ValueSource::CommandLine)
    };
    let interval = cfg.interval.filter(|_| !given("interval"));
    let socket_dir = cfg.file.socket_dir.clone().filter(|_| !given("socket_dir"));
    let fleet = |f: &mut crate::cli::FleetArgs| {
        let p = cfg.file.prometheus.clone().unwrap_or_default();
        f.prometheus = f.prometheus.take().or(p.url);
        f.prometheus_http_config = f.prometheus_http_config.take().or(p.http_config);
        f.selector = f.selector.take().or(p.selector);
        if let Some(r) = cfg.prom_refresh.filter(|_| !given("prometheus_refresh")) {
            f.prometheus_refresh = r;
        }
        if let Some(t) = cfg.prom_timeout.filter(|_| !given("prometheus_timeout")) {
            f.prometheus_timeout = t;
        }
    };
    match sub {
        None => {
            fill_watch(&mut cli.watch, interval, socket_dir);
            fleet(&mut cli.watch.fleet);
        }
        Some(Command::Watch(w)) => {
            fill_watch(w, interval, socket_dir);
            fleet(&mut w.fleet);
        }
        Some(Command::Record(r)) => {
            r.interval = interval.unwrap_or(r.interval);
            r.socket_dir = r.socket_dir.take().or(socket_dir);
        }
        Some(Command::Serve(s)) => {
            s.interval = interval.unwrap_or(s.interval);
            s.socket_dir = s.socket_dir.take().or(socket_dir);
            if let Some(l) = cfg.listen.filter(|_| !given("listen")) {
                s.listen = l;
            }
            s.node = s.node.take().or(cfg.file.node.clone());
        }
        _ => {}
    }
    let display: Option<&mut DisplayArgs> = match cli.command.as_mut() {
        None => Some(&mut cli.watch.display),
        Some(Command::Watch(w)) => Some(&mut w.display),
        Some(Command::Replay(r)) => Some(&mut r.display),
        Some(Command::Demo(d)) => Some(&mut d.display),
        _ => None,
    };
    if let Some(d) = display {
        // Flags only switch these on, so the file can only add to them.
        d.ascii |= cfg.file.ascii == Some(true);
        d.no_color |= cfg.file.color == Some(false);
    }
}

fn fill_watch(
    w: &mut crate::cli::WatchArgs,
    interval: Option<Duration>,
    socket_dir: Option<PathBuf>,
) {
    // `-d` is the command line's too: the file's interval fills in only when neither is typed.
    w.interval = w.delay.or(interval).unwrap_or(w.interval);
    w.socket_dir = w.socket_dir.take().or(socket_dir);
}

/// serde reports an unknown key as "unknown field `x`, expected one of `a`, `b`"; add the
/// closest valid key, which is what the user most likely meant.
pub fn did_you_mean(msg: &str) -> String {
    let Some(rest) = msg.split("unknown field `").nth(1) else {
        return msg.to_string();
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return msg.to_string();
    };
    let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
    match closest(field, &expected) {
        Some(c) => {
            let (line, more) = msg.split_once('\n').map_or((msg, ""), |(a, b)| (a, b));
            // TOML errors are several lines (position, excerpt); keep them, hint first.
            let hint = format!("unknown key `{field}` (did you mean `{c}`?)");
            if more.is_empty() {
                format!("{hint}; {line}")
            } else {
                format!("{hint}\n{line}\n{more}")
            }
        }
        None => msg.to_string(),
    }
}

/// The candidate nearest to `word` by edit distance, if it is near enough to be a typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The full file with every default, as `gpumon config --print-default` prints it.
pub fn default_text() -> String {
    let alerts = toml::to_string(&AlertConfig::default()).unwrap_or_default();
    let alerts: String = alerts
        .lines()
        .map(|l| match l.strip_prefix('[') {
            Some(table) => format!("[alerts.{table}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    format!(
        "{}\n# Alert thresholds (docs/alerts.md); the same keys as --alerts-config.\n{alerts}",
        DEFAULT_HEAD.trim_end()
    )
}

const DEFAULT_HEAD: &str = r#"# gpumon configuration: $XDG_CONFIG_HOME/gpumon/config.toml (~/.config/gpumon/config.toml).
# Every key is optional; flags on the command line win over this file.

# Sampling interval for watch, record and serve: a number with a unit (10ms ... 1h).
interval = "1s"
# Draw with ASCII only (also automatic when the locale is not UTF-8).
ascii = false
# Colours (false is like --no-color or NO_COLOR).
color = true
# Clock times in UTC instead of local time.
utc = false
# The view the TUI opens with: overview, detail or alerts.
view = "overview"
# The span the charts open with: all (the whole history, fitted to the chart) or a fixed
# span: 10s, 30s, 1m, 5m, 15m, 1h, 6h, 24h, 72h or 7d. Unset: all for a replay, 5m live.
# window = "5m"
# The process lists' sort column: used, peak, growth, pid or name (`s` cycles, `I` inverts).
sort = "used"
# The process lists' optional columns, SM%, CPU%, RSS, TIME and CONTAINER: auto (each that
# has data, where the table is wide), on (wherever the command keeps room) or off (`o` cycles).
columns = "auto"
# Directory of companion sockets (default: $GPUMON_DIR, $XDG_RUNTIME_DIR/gpumon, /tmp/gpumon-UID).
# socket_dir = "/run/user/1000/gpumon"
# Address `gpumon serve` listens on: ":19464" (loopback), "HOST:PORT", "[::1]:19464".
listen = "127.0.0.1:19464"
# How long an exited process stays listed with its last allocator state and alerts: a
# duration or "run" (until gpumon stops). Unset: 10m live, the rest of the recording in a replay.
# keep_exited = "10m"
# The name `gpumon serve` gives this node in every series' `hostname` label (default: the
# host name): what the cluster view lists it by.
# node = "gpu-a17"

# The cluster view: every node's `gpumon serve`, read from the Prometheus that scrapes them
# (docs/cluster.md). With url set, a plain `gpumon` opens the node list.
[prometheus]
# url = "http://prometheus.cluster:9090"
# Basic auth, a bearer token file, a CA: the HTTP client format Prometheus's tools read.
# http_config = "/etc/gpumon/prometheus-client.yml"
refresh = "5s"
timeout = "10s"
# Only the nodes that match: node=PAT job=PAT user=PAT and bare words.
# match = "node=gpu-a*"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_default_is_valid_and_is_the_default() {
        let r = parse(&default_text()).expect("default parses");
        assert_eq!(r.file.alerts, Some(AlertConfig::default()));
        assert_eq!(r.interval, Some(Duration::from_secs(1)));
        assert_eq!(r.settings.view, Some(StartView::Overview));
        // Unset, as keep_exited: the span depends on the mode (the_default_window_is_the_apps).
        assert_eq!(r.settings.zoom, None);
        assert_eq!(
            ZOOMS[parse("window = \"5m\"")
                .expect("5m")
                .settings
                .zoom
                .expect("set")]
            .1,
            "5m"
        );
        assert_eq!(r.settings.sort, Some(StartSort::Used));
        assert_eq!(r.settings.alerts, r.file.alerts);
        assert_eq!(
            r.listen.map(|a| a.to_string()).as_deref(),
            Some(crate::export::DEFAULT_LISTEN)
        );
        assert_eq!(r.file.ascii, Some(false));
    }

    #[test]
    fn the_cluster_views_prometheus_is_checked_when_read() {
        let r = parse(
            "[prometheus]\nurl = \"http://prom:9090\"\nrefresh = \"2s\"\nmatch = \"job=bert\"",
        )
        .expect("valid");
        assert_eq!(r.prom_refresh, Some(Duration::from_secs(2)));
        let p = r.file.prometheus.expect("set");
        assert_eq!(p.url.as_deref(), Some("http://prom:9090"));
        for (text, key) in [
            ("[prometheus]\ntimeout = \"forever\"", "prometheus.timeout"),
            ("[prometheus]\nmatch = \"rack=1\"", "prometheus.match"),
        ] {
            let e = format!("{:#}", parse(text).expect_err(text));
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn view_and_sort_are_read_by_their_names() {
        let r = parse("view = \"alerts\"\nsort = \"pid\"").expect("valid");
        assert_eq!(r.settings.view, Some(StartView::Alerts));
        assert_eq!(r.settings.sort, Some(StartSort::Pid));
        let r = parse("sort = \"growth\"\nutc = true").expect("valid");
        assert_eq!(r.settings.sort, Some(StartSort::Growth));
        assert_eq!(r.settings.utc, Some(true));
        assert_eq!(r.settings.view, None);
    }

    /// `alpha = nan` once passed as valid and silenced growth alerts, so non-finite numbers
    /// are refused.
    #[test]
    fn nan_and_infinity_are_refused_naming_the_key() {
        for (text, key) in [
            ("[alerts.growth]\nalpha = nan", "alerts.growth.alpha"),
            (
                "[alerts.growth]\nsustained_frac = nan",
                "alerts.growth.sustained_frac",
            ),
            (
                "[alerts.growth]\nmin_signal_to_noise = -inf",
                "alerts.growth.min_signal_to_noise",
            ),
        ] {
            let e = parse(text).expect_err(text);
            let msg = format!("{e:#}");
            assert!(msg.contains(key) && msg.contains("finite"), "{msg}");
        }
        assert!(parse("[alerts.growth]\nalpha = 0.3").is_ok());
    }

    #[test]
    fn keep_exited_is_a_span_or_the_whole_run() {
        let keep = |text: &str| parse(text).expect("valid").settings.keep_exited;
        assert_eq!(keep(""), None);
        assert_eq!(keep("keep_exited = \"run\""), Some(None));
        assert_eq!(keep("keep_exited = \"30s\""), Some(Some(30_000)));
    }

    #[test]
    fn a_misspelt_key_names_the_closest_one() {
        let e = parse("intervl = \"1s\"").expect_err("unknown key");
        let msg = format!("{e:#}");
        assert!(
            msg.contains("`intervl`") && msg.contains("did you mean `interval`"),
            "{msg}"
        );
        let e = parse("[alerts.growth]\nwarmup_epoch = 5\n").expect_err("nested unknown key");
        let msg = format!("{e:#}");
        assert!(msg.contains("did you mean `warmup_epochs`"), "{msg}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("interval = \"10\"", "interval"),
            ("view = \"detial\"", "did you mean 'detail'"),
            ("window = \"2m\"", "window"),
            ("sort = \"peek\"", "did you mean 'peak'"),
            ("listen = \"19464\"", "listen"),
            ("keep_exited = \"soon\"", "keep_exited"),
        ] {
            let msg = format!("{:#}", parse(text).expect_err(text));
            assert!(msg.contains(key), "{text}: {msg}");
        }
    }

    #[test]
    fn json_alert_config_gets_the_same_hint() {
        let e = serde_json::from_str::<AlertConfig>(r#"{"growth":{"alpah":0.5}}"#)
            .expect_err("unknown field");
        let msg = did_you_mean(&e.to_string());
        assert!(msg.contains("did you mean `alpha`"), "{msg}");
    }

    #[test]
    fn unrelated_words_get_no_suggestion() {
        assert_eq!(closest("zzzzzzzz", &["interval", "view"]), None);
        assert_eq!(closest("colour", &["color", "utc"]), Some("color"));
    }

    #[test]
    fn flags_win_over_the_file() {
        use clap::{CommandFactory, FromArgMatches};
        let cfg = parse("interval = \"250ms\"\nlisten = \":9000\"\nascii = true").expect("ok");
        let run = |args: &[&str]| {
            let m = Cli::command().try_get_matches_from(args).expect("parses");
            let mut cli = Cli::from_arg_matches(&m).expect("cli");
            apply(&cfg, &mut cli, &m);
            cli
        };
        let cli = run(&["gpumon"]);
        assert_eq!(cli.watch.interval, Duration::from_millis(250));
        assert!(cli.watch.display.ascii);
        let cli = run(&["gpumon", "--interval", "1s"]);
        assert_eq!(
            cli.watch.interval,
            Duration::from_secs(1),
            "typed default wins"
        );
        let cli = run(&["gpumon", "-d", "5"]);
        assert_eq!(
            cli.watch.interval,
            Duration::from_millis(500),
            "-d is typed too"
        );
        let Some(Command::Serve(s)) = run(&["gpumon", "serve"]).command else {
            panic!("serve");
        };
        assert_eq!(s.listen.to_string(), "127.0.0.1:9000");
        assert_eq!(s.interval, Duration::from_millis(250));
        let Some(Command::Serve(s)) = run(&["gpumon", "serve", "--listen", ":1234"]).command else {
            panic!("serve");
        };
        assert_eq!(s.listen.port(), 1234);
    }
}
