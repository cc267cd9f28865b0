//! What the configuration file sets, as plain values the modes are handed: `config` reads
//! and checks the file into a `Settings`, the runner passes it down, `tui` turns the screen's
//! part into its own state. No file, no global, no screen type here: the names a person
//! writes ("detail", "growth") are matched once, in `config`, into these enums.

use crate::model::alerts::config::AlertConfig;

/// Zoom steps of the memory charts: `all` (the whole history, fitted to the chart) first,
/// then fixed spans shortest first. A span is what the time axis shows, whatever the history
/// (data scrolls in from the right); the label is the span, so `zoom 5m` spans 5 minutes.
/// Here, below `config` and `tui`: the file's `window` names one, the screen steps through
/// them, and neither has to know the other.
pub const ZOOMS: [(i64, &str); 11] = [
    (0, "all"),
    (10_000, "10s"),
    (30_000, "30s"),
    (60_000, "1m"),
    (300_000, "5m"),
    (900_000, "15m"),
    (3_600_000, "1h"),
    (6 * 3_600_000, "6h"),
    (24 * 3_600_000, "24h"),
    (72 * 3_600_000, "72h"),
    (7 * 24 * 3_600_000, "7d"),
];

/// The view a TUI opens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartView {
    Overview,
    Detail,
    Alerts,
}

impl StartView {
    /// Every view with the name the file uses for it.
    pub const NAMES: [(&'static str, StartView); 3] = [
        ("overview", StartView::Overview),
        ("detail", StartView::Detail),
        ("alerts", StartView::Alerts),
    ];
}

/// The column the process lists open sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartSort {
    Used,
    Peak,
    Growth,
    Pid,
    Name,
}

impl StartSort {
    /// Every sort column with the name the file uses for it.
    pub const NAMES: [(&'static str, StartSort); 5] = [
        ("used", StartSort::Used),
        ("peak", StartSort::Peak),
        ("growth", StartSort::Growth),
        ("pid", StartSort::Pid),
        ("name", StartSort::Name),
    ];
}

/// The process table's optional columns (SM%, CPU%, RSS, TIME, CONTAINER): `Auto` shows
/// each that has data where the table is wide; `On` wherever the command keeps room;
/// `Off` never (`o` and F2 cycle them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExtraColumns {
    #[default]
    Auto,
    On,
    Off,
}

impl ExtraColumns {
    /// Every mode with the name the file uses for it.
    pub const NAMES: [(&'static str, ExtraColumns); 3] = [
        ("auto", ExtraColumns::Auto),
        ("on", ExtraColumns::On),
        ("off", ExtraColumns::Off),
    ];

    /// The next mode `o` gives.
    pub fn next(self) -> ExtraColumns {
        match self {
            ExtraColumns::Auto => ExtraColumns::On,
            ExtraColumns::On => ExtraColumns::Off,
            ExtraColumns::Off => ExtraColumns::Auto,
        }
    }
}

/// The file's settings that reach past the command line (the rest it fills into the flags).
/// `None` everywhere leaves each mode its own default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub view: Option<StartView>,
    /// The chart window, as a position in `ZOOMS` (checked by `config`).
    pub zoom: Option<usize>,
    pub sort: Option<StartSort>,
    pub columns: Option<ExtraColumns>,
    /// `keep_exited`: `Some(None)` is "run" (until gpumon stops), `Some(Some(ms))` a span.
    pub keep_exited: Option<Option<i64>>,
    /// Clock times in UTC.
    pub utc: Option<bool>,
    /// Alert thresholds when `--alerts-config` is not given.
    pub alerts: Option<AlertConfig>,
}
