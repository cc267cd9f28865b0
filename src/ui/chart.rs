//! Memory charts drawn cell by cell, so they work in ASCII as well as Unicode,
//! show gaps as gaps (not zeros), and keep spikes: each column shows the
//! maximum of the buckets it covers.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::theme::Theme;
use crate::model::bytes::gib1;
use crate::model::series::Series;
use crate::model::time::Ts;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Col {
    /// No data for this time (before the first sample).
    None,
    /// Samples were attempted and failed.
    Gap,
    Val(f64),
}

/// Reduce a series to `width` columns over `[from, to]` (max per column).
pub fn columns(series: &Series, from: Ts, to: Ts, width: u16) -> Vec<Col> {
    let w = usize::from(width);
    let mut cols = vec![Col::None; w];
    if w == 0 || to <= from {
        return cols;
    }
    let span = (to - from) as f64;
    let res = series.resolution(from);
    for b in series.window(from, to) {
        // A bucket covers [start, start + res): mark every column it overlaps.
        let c0 = (((b.start - from) as f64 / span) * w as f64).floor();
        let c1 = (((b.start + res - 1 - from) as f64 / span) * w as f64).floor();
        let (c0, c1) = (c0.max(0.0) as usize, (c1.max(0.0) as usize).min(w - 1));
        for c in cols.iter_mut().take(c1 + 1).skip(c0) {
            *c = match (*c, b.is_gap()) {
                (Col::Val(v), false) => Col::Val(v.max(b.max)),
                (Col::Val(v), true) => Col::Val(v),
                (_, false) => Col::Val(b.max),
                (_, true) => Col::Gap,
            };
        }
    }
    cols
}

/// One-row sparkline scaled to `y_max`.
pub fn sparkline(
    buf: &mut Buffer,
    area: Rect,
    cols: &[Col],
    y_max: f64,
    theme: &Theme,
    style: Style,
) {
    for (i, c) in cols.iter().enumerate().take(usize::from(area.width)) {
        let x = area.x + i as u16;
        let (ch, st) = match *c {
            Col::None => (' ', style),
            Col::Gap => (theme.gap(), theme.dim()),
            Col::Val(v) => {
                let f = if y_max > 0.0 { v / y_max } else { 0.0 };
                // Anything above zero stays visible.
                let ch = if v > 0.0 && theme.bar(f) == ' ' {
                    theme.bar(0.13)
                } else {
                    theme.bar(f)
                };
                (ch, style)
            }
        };
        buf[(x, area.y)].set_char(ch).set_style(st);
    }
}

pub struct AreaChart<'a> {
    pub cols: &'a [Col],
    pub y_max: f64,
    /// Horizontal reference lines (value, label) such as the peak.
    pub lines: Vec<(f64, String, Style)>,
    /// Vertical markers (column, label), e.g. epoch ends.
    pub marks: Vec<(usize, String)>,
    pub style: Style,
    pub x_labels: (String, String),
}

pub const Y_AXIS: u16 = 6;

impl AreaChart<'_> {
    pub fn render(&self, buf: &mut Buffer, area: Rect, theme: &Theme) {
        if area.height < 3 || area.width <= Y_AXIS + 4 {
            return;
        }
        let plot = Rect {
            x: area.x + Y_AXIS,
            y: area.y,
            width: area.width - Y_AXIS,
            height: area.height - 1,
        };
        let h = f64::from(plot.height);
        // Y axis: top, middle, zero, in GiB.
        let label = |v: f64| format!("{:>5}", format!("{}G", gib1(v as u64)));
        buf.set_string(area.x, plot.y, label(self.y_max), theme.dim());
        if plot.height >= 5 {
            buf.set_string(
                area.x,
                plot.y + plot.height / 2,
                label(self.y_max * (1.0 - f64::from(plot.height / 2) / h)),
                theme.dim(),
            );
        }
        buf.set_string(
            area.x,
            plot.y + plot.height - 1,
            format!("{:>5}", "0"),
            theme.dim(),
        );
        for (i, c) in self.cols.iter().enumerate().take(usize::from(plot.width)) {
            let x = plot.x + i as u16;
            match *c {
                Col::None => {}
                Col::Gap => {
                    buf[(x, plot.y + plot.height - 1)]
                        .set_char(theme.gap())
                        .set_style(theme.dim());
                }
                Col::Val(v) => {
                    let filled = if self.y_max > 0.0 {
                        (v / self.y_max).clamp(0.0, 1.0) * h
                    } else {
                        0.0
                    };
                    for r in 0..plot.height {
                        let level = filled - f64::from(r);
                        if level <= 0.0 {
                            break;
                        }
                        let y = plot.y + plot.height - 1 - r;
                        let ch = if level >= 1.0 {
                            theme.full()
                        } else {
                            theme.bar(level)
                        };
                        if ch != ' ' {
                            buf[(x, y)].set_char(ch).set_style(self.style);
                        }
                    }
                    if v > 0.0 && filled < 0.5 {
                        buf[(x, plot.y + plot.height - 1)]
                            .set_char(theme.bar(0.13))
                            .set_style(self.style);
                    }
                }
            }
        }
        // Epoch marks first: a reference line's label (the peak) must stay readable.
        let mut last_label_end = 0u16;
        for (col, text) in &self.marks {
            let Ok(c) = u16::try_from(*col) else { continue };
            if c >= plot.width {
                continue;
            }
            let x = plot.x + c;
            for y in plot.y..plot.y + plot.height {
                if buf[(x, y)].symbol() == " " {
                    buf[(x, y)].set_char(theme.vmark()).set_style(theme.dim());
                }
            }
            if x >= last_label_end && x + text.len() as u16 <= plot.x + plot.width {
                buf.set_string(x, plot.y, text, theme.dim());
                last_label_end = x + text.len() as u16 + 1;
            }
        }
        for (value, text, style) in &self.lines {
            if self.y_max <= 0.0 {
                continue;
            }
            let r = ((value / self.y_max).clamp(0.0, 1.0) * h).ceil().max(1.0) as u16;
            let y = plot.y + plot.height - r.min(plot.height);
            for x in plot.x..plot.x + plot.width {
                if buf[(x, y)].symbol() == " " {
                    buf[(x, y)].set_char(theme.dashed()).set_style(*style);
                }
            }
            let tx = plot.x + plot.width.saturating_sub(text.chars().count() as u16 + 1);
            buf.set_stringn(tx, y, text, usize::from(plot.width), *style);
        }
        let y = area.y + area.height - 1;
        buf.set_string(plot.x, y, &self.x_labels.0, theme.dim());
        let right = &self.x_labels.1;
        let rx = plot.x + plot.width.saturating_sub(right.chars().count() as u16);
        buf.set_string(rx, y, right, theme.dim());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_keep_spikes_and_gaps() {
        let mut s = Series::default();
        for i in 0..60 {
            let v = if i == 17 {
                Some(100.0)
            } else if i == 40 {
                None
            } else {
                Some(10.0)
            };
            s.push(i * 1_000, v);
        }
        let cols = columns(&s, 0, 60_000, 6);
        assert_eq!(cols[1], Col::Val(100.0), "spike survives a 10:1 reduction");
        assert_eq!(cols[0], Col::Val(10.0));
        // The failed sample sits among good ones: the column still shows data.
        assert_eq!(cols[4], Col::Val(10.0));
        let fine = columns(&s, 0, 60_000, 60);
        assert_eq!(fine[40], Col::Gap);
        let before = columns(&s, -60_000, 60_000, 4);
        assert_eq!(before[0], Col::None);
    }

    #[test]
    fn ascii_sparkline_uses_only_ascii() {
        let theme = Theme {
            ascii: true,
            color: false,
            utc: true,
        };
        let cols = [
            Col::None,
            Col::Gap,
            Col::Val(0.0),
            Col::Val(1.0),
            Col::Val(50.0),
            Col::Val(100.0),
        ];
        let area = Rect::new(0, 0, 6, 1);
        let mut buf = Buffer::empty(area);
        sparkline(&mut buf, area, &cols, 100.0, &theme, Style::new());
        let line: String = (0..6).map(|x| buf[(x, 0)].symbol().to_string()).collect();
        assert!(line.is_ascii(), "{line}");
        assert_eq!(line, " x _~#");
    }
}
