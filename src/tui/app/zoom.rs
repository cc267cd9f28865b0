//! Chart view state: the zoom step (`+`/`-` through fixed spans, `w` to the whole history
//! and back) and which series the detail chart shows (`v`: all, or one alone).

use super::{App, ZOOM_ALL, ZOOMS};

/// Series the detail chart shows: every one, or one alone on its own fitted scale (a leak
/// in the per-epoch floor is a slope of a few MiB under lines of GiB; alone it fills the
/// chart). The floor comes first: it is what a leak moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Solo {
    #[default]
    All,
    Floor,
    Used,
    Reserved,
    Allocated,
    Peak,
}

impl Solo {
    /// The next state of the `v` cycle: all → floor → used → resv → alloc → peak → all.
    pub fn next(self) -> Solo {
        match self {
            Solo::All => Solo::Floor,
            Solo::Floor => Solo::Used,
            Solo::Used => Solo::Reserved,
            Solo::Reserved => Solo::Allocated,
            Solo::Allocated => Solo::Peak,
            Solo::Peak => Solo::All,
        }
    }

    /// The series' name as the chart legend spells it.
    pub fn name(self) -> &'static str {
        match self {
            Solo::All => "all",
            Solo::Floor => "floor/ep",
            Solo::Used => "used",
            Solo::Reserved => "resv",
            Solo::Allocated => "alloc",
            Solo::Peak => "peak/ep",
        }
    }
}

/// `5m` spoken: `5 min`, `10 s`, `24 h`, `7 days`.
fn spoken(ms: i64) -> String {
    match ms {
        ms if ms < 60_000 => format!("{} s", ms / 1_000),
        ms if ms < 3_600_000 => format!("{} min", ms / 60_000),
        ms if ms < 72 * 3_600_000 => format!("{} h", ms / 3_600_000),
        ms => format!("{} days", ms / 86_400_000),
    }
}

impl App {
    /// How long the charted history is: from the recording's (or session's) start.
    fn history_ms(&self) -> i64 {
        let s = self.view_state();
        s.header.as_ref().map_or(0, |h| (s.now - h.started).max(0))
    }

    /// `+` (shorter) and `-` (longer): the next span; from `all`, the span next to the
    /// history shown, so the axis changes at every step.
    pub(super) fn zoom_step(&mut self, longer: bool) {
        let next = if self.zoom == ZOOM_ALL {
            let h = self.history_ms();
            let spans = || ZOOMS.iter().enumerate().skip(1);
            if longer {
                spans().find(|(_, (ms, _))| *ms > h).map(|(i, _)| i)
            } else {
                spans()
                    .rfind(|(_, (ms, _))| *ms < h)
                    .map_or(Some(1), |(i, _)| Some(i))
            }
        } else if longer {
            (self.zoom + 1 < ZOOMS.len()).then_some(self.zoom + 1)
        } else {
            (self.zoom > 1).then_some(self.zoom - 1)
        };
        match next {
            Some(z) => {
                self.zoom = z;
                self.zoom_back = z;
                let (ms, label) = ZOOMS[z];
                self.flash = Some(format!(
                    "zoom {label}: the charts show the last {} (w: all history)",
                    spoken(ms)
                ));
            }
            None => {
                let label = ZOOMS[self.zoom].1;
                self.flash = Some(if self.zoom == ZOOM_ALL {
                    "zoom all already shows more than the longest span (7d)".into()
                } else if longer {
                    format!("zoom {label} is the longest span; w: all history")
                } else {
                    format!("zoom {label} is the shortest span")
                });
            }
        }
    }

    /// `w`: the whole history fitted to the chart, and back to the span left.
    pub(super) fn zoom_all(&mut self) {
        if self.zoom == ZOOM_ALL {
            self.zoom = self.zoom_back.clamp(1, ZOOMS.len() - 1);
            let (ms, label) = ZOOMS[self.zoom];
            self.flash = Some(format!(
                "zoom {label}: the charts show the last {} (w: all history)",
                spoken(ms)
            ));
        } else {
            self.zoom_back = self.zoom;
            self.zoom = ZOOM_ALL;
            self.flash = Some(format!(
                "zoom all: the charts fit the whole history (w: back to {})",
                ZOOMS[self.zoom_back].1
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solo_cycle_starts_with_the_floor_and_comes_back() {
        let mut s = Solo::All;
        let mut seen = vec![];
        for _ in 0..6 {
            s = s.next();
            seen.push(s.name());
        }
        assert_eq!(
            seen,
            ["floor/ep", "used", "resv", "alloc", "peak/ep", "all"]
        );
    }

    #[test]
    fn spans_are_spoken_in_their_unit() {
        assert_eq!(spoken(10_000), "10 s");
        assert_eq!(spoken(300_000), "5 min");
        assert_eq!(spoken(24 * 3_600_000), "24 h");
        assert_eq!(spoken(7 * 86_400_000), "7 days");
    }
}
