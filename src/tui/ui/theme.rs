//! Glyphs and colours, decided once: Unicode or ASCII (SSH to odd terminals),
//! colour or `NO_COLOR`. Every widget draws through this so both modes stay complete.

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub ascii: bool,
    pub color: bool,
    /// Show clock times in UTC (recordings from other zones, deterministic tests).
    pub utc: bool,
}

impl Default for Theme {
    fn default() -> Self {
        Theme {
            ascii: false,
            color: true,
            utc: false,
        }
    }
}

const BARS_UNICODE: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
// Each step reaches higher in the cell and carries more ink than the one before, so a
// rising ASCII curve reads as rising (`_` then `.` read as a drop).
const BARS_ASCII: [char; 9] = [' ', '.', '.', ':', ':', '|', '|', '#', '#'];

impl Theme {
    /// Decide from flags and the environment: `NO_COLOR` (any value) disables colour;
    /// a locale without UTF-8 switches to ASCII.
    pub fn detect(force_ascii: bool, force_no_color: bool) -> Theme {
        let no_color =
            force_no_color || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
            .is_some_and(|v| {
                let v = v.to_ascii_lowercase();
                v.contains("utf-8") || v.contains("utf8")
            });
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb" || t == "linux");
        Theme {
            ascii: force_ascii || !utf8 || dumb,
            color: !no_color,
            utc: false,
        }
    }

    /// Level glyph for a fraction in [0, 1].
    pub fn bar(&self, frac: f64) -> char {
        let set = if self.ascii {
            &BARS_ASCII
        } else {
            &BARS_UNICODE
        };
        let i = (frac.clamp(0.0, 1.0) * 8.0).round() as usize;
        set[i.min(8)]
    }

    pub fn full(&self) -> char {
        if self.ascii { '#' } else { '█' }
    }

    pub fn empty(&self) -> char {
        if self.ascii { '.' } else { '░' }
    }

    pub fn gap(&self) -> char {
        if self.ascii { 'x' } else { '╳' }
    }

    pub fn hline(&self) -> char {
        if self.ascii { '-' } else { '─' }
    }

    pub fn dashed(&self) -> char {
        if self.ascii { '-' } else { '┄' }
    }

    pub fn warn_sign(&self) -> &'static str {
        if self.ascii { "!" } else { "⚠" }
    }

    pub fn dot(&self) -> &'static str {
        if self.ascii { "-" } else { "·" }
    }

    pub fn border(&self) -> border::Set<'static> {
        if self.ascii {
            border::Set {
                top_left: "+",
                top_right: "+",
                bottom_left: "+",
                bottom_right: "+",
                vertical_left: "|",
                vertical_right: "|",
                horizontal_top: "-",
                horizontal_bottom: "-",
            }
        } else {
            border::ROUNDED
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub fn normal(&self) -> Style {
        Style::new()
    }

    pub fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }

    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn used(&self) -> Style {
        self.fg(Color::Green)
    }

    /// Allocator series in the process chart: reserved (the pool) and allocated (tensors).
    pub fn reserved(&self) -> Style {
        self.fg(Color::Blue)
    }

    pub fn allocated(&self) -> Style {
        self.fg(Color::Magenta)
    }

    /// The per-epoch floor: what a leak raises.
    pub fn floor(&self) -> Style {
        self.fg(Color::Cyan)
    }

    pub fn peak(&self) -> Style {
        self.fg(Color::Yellow)
    }

    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn error(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    pub fn selected(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    pub fn header(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Black).bg(Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    pub fn recording(&self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Magenta)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        }
    }

    /// Memory-pressure colour of a used fraction.
    pub fn pressure(&self, frac: f64) -> Style {
        match frac {
            f if f >= 0.9 => self.fg(Color::Red),
            f if f >= 0.75 => self.fg(Color::Yellow),
            _ => self.used(),
        }
    }

    /// `Dec 01`: the day, for time axes whose ticks are days apart.
    pub fn day(&self, t: crate::model::time::Ts) -> String {
        let fmt = "%b %d";
        if self.utc {
            chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
                .map_or_else(|| "--".into(), |d| d.format(fmt).to_string())
        } else {
            crate::model::time::local(t).map_or_else(|| "--".into(), |d| d.format(fmt).to_string())
        }
    }

    pub fn clock(&self, t: crate::model::time::Ts) -> String {
        if self.utc {
            chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t)
                .map_or_else(|| "--:--:--".into(), |d| d.format("%H:%M:%S").to_string())
        } else {
            crate::model::time::clock_label(t)
        }
    }
}
