//! Bytes and durations as people read them, shared by the screen, logs, exports and alert
//! messages: one spelling per meaning (binary units, as nvidia-smi).

pub mod out_file;

const KIB: f64 = 1024.0;
const MIB: f64 = KIB * 1024.0;
const GIB: f64 = MIB * 1024.0;

pub const MIB_U64: u64 = 1 << 20;
pub const GIB_U64: u64 = 1 << 30;

/// `512 B`, `3.0 KiB`, `18 MiB`, `61.2 GiB`: three significant digits at most.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= GIB {
        fmt3(b / GIB, "GiB")
    } else if b >= MIB {
        fmt3(b / MIB, "MiB")
    } else if b >= KIB {
        fmt3(b / KIB, "KiB")
    } else {
        format!("{bytes} B")
    }
}

/// `96.0MiB`: `human` without the space, for summaries and tight columns.
pub fn compact(bytes: u64) -> String {
    human(bytes).replace(' ', "")
}

/// `+96.0MiB`, `-1.50GiB`: a change that may be fractional or negative, compact.
pub fn compact_signed(bytes: f64) -> String {
    let sign = if bytes < 0.0 { "-" } else { "+" };
    format!("{sign}{}", compact(bytes.abs().round() as u64))
}

/// Compact GiB with one decimal, for tight columns (`61.2`).
pub fn gib1(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / GIB)
}

/// Age or uptime: `45s`, `12m`, `3h05m`, `2d04h`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Rough duration for forecasts: `~40 min`, `~31 h`, `~6 days`.
pub fn rough_duration(ms: i64) -> String {
    let (n, unit) = rough(ms);
    format!("~{n} {}", ["min", "h", "days"][unit])
}

/// Compact rough duration for summaries: `40m`, `31h`, `6d`.
pub fn rough_duration_short(ms: i64) -> String {
    let (n, unit) = rough(ms);
    format!("{n}{}", ["m", "h", "d"][unit])
}

/// Whole minutes below 90 min, hours below two days, else days (unit 0, 1, 2).
fn rough(ms: i64) -> (f64, usize) {
    let min = ms.max(0) as f64 / 60_000.0;
    if min < 90.0 {
        (min.round().max(1.0), 0)
    } else if min < 48.0 * 60.0 {
        ((min / 60.0).round(), 1)
    } else {
        ((min / 1440.0).round(), 2)
    }
}

/// A sampling interval: `1 s`, `250 ms`.
pub fn interval(ms: u64) -> String {
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// A position in a recording: `1:05`, or `1:02:05` past an hour (`hours` forces the long
/// form, so a position and a total past an hour line up).
pub fn clock_pos(ms: i64, hours: bool) -> String {
    let s = ms.max(0) / 1000;
    if hours || s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// Characters that steer a terminal or reorder text rather than show: controls (C0, DEL,
/// C1: escape sequences start with them), bidi overrides and isolates, zero-width and
/// line-separator characters. A name or message from a file or a peer loses them
/// before gpumon prints it, so printed text is inert.
pub fn is_steering(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `s` with every steering character (`is_steering`) shown as `?`.
pub fn inert(s: &str) -> String {
    s.chars()
        .map(|c| if is_steering(c) { '?' } else { c })
        .collect()
}

/// A message of several lines for stderr: each line made inert, the line breaks kept.
pub fn inert_lines(s: &str) -> String {
    s.split('\n').map(inert).collect::<Vec<_>>().join("\n")
}

/// Longest line, and most lines, of one message gpumon prints on stderr.
pub const LINE_MAX: usize = 1_000;
pub const LINES_MAX: usize = 40;

/// A message for stderr: every line inert (`inert`) and cut at `LINE_MAX` characters,
/// at most `LINES_MAX` lines, so a hostile value in an error (a recording line, a config
/// value, a peer's text) can neither steer the terminal nor flood it.
pub fn printable(s: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let total = s.split('\n').count();
    for line in s.split('\n').take(LINES_MAX) {
        out.push(quote_at(line, LINE_MAX));
    }
    if total > LINES_MAX {
        out.push(format!("… ({} more lines)", total - LINES_MAX));
    }
    out.join("\n")
}

/// `eprintln!` for gpumon's own messages: what they carry is made `printable`. A warning
/// when logging with levels (`serve`/`record --log-level`); `say_info!` and `say_error!` say
/// the other levels.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::fmt::emit($crate::fmt::LogLevel::Warn, &format!($($arg)*))
    };
}

/// `say!` for what a daemon reports in normal operation (where it serves, what it records).
#[macro_export]
macro_rules! say_info {
    ($($arg:tt)*) => {
        $crate::fmt::emit($crate::fmt::LogLevel::Info, &format!($($arg)*))
    };
}

/// `say!` for the error that ends gpumon.
#[macro_export]
macro_rules! say_error {
    ($($arg:tt)*) => {
        $crate::fmt::emit($crate::fmt::LogLevel::Error, &format!($($arg)*))
    };
}

/// The levels of `--log-level`, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LogLevel {
    Error = 1,
    Warn = 2,
    Info = 3,
}

impl LogLevel {
    fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "ERROR",
            LogLevel::Warn => "WARN",
            LogLevel::Info => "INFO",
        }
    }
}

/// 0: plain lines, none dropped (the terminal modes, and daemons not given a level).
static LOG_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// From now on, stderr lines start with their UTC time and level, and lines below `level`
/// are dropped: what a daemon's log under systemd, in a pod or in a file needs.
pub fn set_log_level(level: LogLevel) {
    LOG_LEVEL.store(level as u8, std::sync::atomic::Ordering::Relaxed);
}

/// Write one of gpumon's messages to stderr, as `set_log_level` says.
pub fn emit(level: LogLevel, text: &str) {
    let max = LOG_LEVEL.load(std::sync::atomic::Ordering::Relaxed);
    let now = if max == 0 {
        String::new()
    } else {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    if let Some(line) = log_line(max, level, &now, text) {
        eprintln!("{line}");
    }
}

/// The stderr text of one message (None: below the level). Every line of a message carries
/// the stamp, so a log reader that splits on lines keeps each with its time and level.
fn log_line(max: u8, level: LogLevel, now: &str, text: &str) -> Option<String> {
    let text = printable(text);
    if max == 0 {
        return Some(text);
    }
    if level as u8 > max {
        return None;
    }
    let lines: Vec<String> = text
        .split('\n')
        .map(|l| format!("{now} {:<5} {l}", level.name()))
        .collect();
    Some(lines.join("\n"))
}

/// Writes `text` to stdout and flushes. A reader that stopped early (`gpumon snapshot |
/// head -1`) has what it wanted: a closed pipe is success, as for other Unix tools (Rust
/// ignores SIGPIPE, so `println!` would panic there). Other errors (`> /dev/full`) are returned.
pub fn print_stdout(text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot write to stdout: {e}"),
        )),
        done => done,
    }
}

/// Longest part of a value an error message repeats.
pub const QUOTE_MAX: usize = 120;

/// A value quoted in a message: inert, and cut at `QUOTE_MAX` characters with the
/// length said (a 200 MB config line gives a line of error, not 200 MB).
pub fn quote(s: &str) -> String {
    quote_at(s, QUOTE_MAX)
}

fn quote_at(s: &str, max: usize) -> String {
    if s.len() <= max {
        return inert(s);
    }
    let head: String = s.chars().take(max).collect();
    if head.len() == s.len() {
        return inert(s);
    }
    format!("{}… ({} bytes in all)", inert(&head), s.len())
}

fn fmt3(v: f64, unit: &str) -> String {
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_lines_carry_time_and_level_and_drop_what_is_below() {
        use super::{LogLevel, log_line};
        let now = "2026-12-04T18:20:00.123Z";
        assert_eq!(
            log_line(0, LogLevel::Info, now, "gpumon: a"),
            Some("gpumon: a".into())
        );
        assert_eq!(
            log_line(3, LogLevel::Info, now, "gpumon: a\nb"),
            Some(format!("{now} INFO  gpumon: a\n{now} INFO  b"))
        );
        assert_eq!(
            log_line(2, LogLevel::Warn, now, "w"),
            Some(format!("{now} WARN  w"))
        );
        assert_eq!(log_line(2, LogLevel::Info, now, "i"), None);
        assert_eq!(
            log_line(1, LogLevel::Error, now, "e"),
            Some(format!("{now} ERROR e"))
        );
        assert_eq!(log_line(1, LogLevel::Warn, now, "w"), None);
    }

    use super::*;

    #[test]
    fn formats_each_magnitude() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 * 1024), "3.00 KiB");
        assert_eq!(human(18 * MIB_U64), "18.0 MiB");
        assert_eq!(human(615 * MIB_U64), "615 MiB");
        assert_eq!(human(143_771 * MIB_U64), "140 GiB");
        assert_eq!(compact(96 * MIB_U64), "96.0MiB");
        assert_eq!(compact_signed(-1.5 * GIB), "-1.50GiB");
        assert_eq!(compact_signed(96.0 * MIB), "+96.0MiB");
        assert_eq!(gib1(61 * GIB_U64 + GIB_U64 / 5), "61.2");
    }

    #[test]
    fn printed_text_is_inert_and_quotes_are_capped() {
        let hostile = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m a\u{202E}b\u{2066}c\u{200B}d";
        let out = inert(hostile);
        assert!(!out.chars().any(is_steering), "{out:?}");
        assert_eq!(out, "?]0;PWNED??[2J?31m a?b?c?d");
        assert_eq!(inert_lines("x\u{1b}\ny"), "x?\ny");
        assert_eq!(
            inert("GPU 0: 80 GiB · ünïcode ✓"),
            "GPU 0: 80 GiB · ünïcode ✓"
        );
        let long = "v".repeat(10_000_000);
        let q = quote(&long);
        assert!(
            q.len() < 200 && q.ends_with("(10000000 bytes in all)"),
            "{q}"
        );
        assert_eq!(quote("short"), "short");
        let msg = format!("bad value '{}'\n\u{1b}[2Jnext", "x".repeat(5_000_000));
        let p = printable(&msg);
        assert!(p.len() < 2 * LINE_MAX, "{}", p.len());
        assert!(p.ends_with("\n?[2Jnext"), "{p}");
        let many = "l\n".repeat(1000);
        assert_eq!(printable(&many).lines().count(), LINES_MAX + 1);
    }

    #[test]
    fn durations_pick_the_right_unit() {
        assert_eq!(duration(45_000), "45s");
        assert_eq!(duration(12 * 60_000 + 5), "12m");
        assert_eq!(duration(3 * 3_600_000 + 5 * 60_000), "3h05m");
        assert_eq!(duration(52 * 3_600_000), "2d04h");
        assert_eq!(duration(-5), "0s");
        assert_eq!(rough_duration(31 * 3_600_000), "~31 h");
        assert_eq!(rough_duration(40 * 60_000), "~40 min");
        assert_eq!(rough_duration(6 * 86_400_000), "~6 days");
        assert_eq!(rough_duration_short(31 * 3_600_000), "31h");
        assert_eq!(interval(1000), "1 s");
        assert_eq!(interval(250), "250 ms");
        assert_eq!(clock_pos(65_000, false), "1:05");
        assert_eq!(clock_pos(65_000, true), "0:01:05");
    }
}
