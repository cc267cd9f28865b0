//! Text exposition writer for both formats a scraper may ask for: Prometheus
//! text 0.0.4 and OpenMetrics 1.0. Hand-written because the two Rust client
//! crates each speak only one of them and are built around long-lived metric
//! objects, while gpumon renders a fresh, bounded label set per scrape.

use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text exposition format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text (`# EOF` terminated, `# UNIT`, `info` type).
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    /// `name` is the family name; samples get `_total`.
    Counter,
    /// `name` is the family name; samples get `_info` and value 1.
    Info,
}

/// A sample value: integers are printed exactly (byte counts exceed f64's
/// exact range only past 8 PiB, but exact text also diffs cleanly in tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

pub(crate) type Labels<'a> = [(&'a str, &'a str)];

struct Family {
    name: &'static str,
    kind: Kind,
    unit: Option<&'static str>,
    help: &'static str,
}

/// Collects families in order; metadata is written with a family's first
/// sample, so a family with nothing to report leaves no trace.
pub(crate) struct Encoder {
    format: Format,
    out: String,
    pending: Option<Family>,
    sample_name: String,
}

impl Encoder {
    pub(crate) fn new(format: Format) -> Self {
        Encoder {
            format,
            out: String::with_capacity(64 * 1024),
            pending: None,
            sample_name: String::new(),
        }
    }

    /// Start a family. Every sample up to the next `family` call belongs to it,
    /// so callers emit one family's samples contiguously as both formats require.
    /// `unit` is only announced when the name ends with it (an OpenMetrics rule).
    pub(crate) fn family(
        &mut self,
        name: &'static str,
        kind: Kind,
        unit: Option<&'static str>,
        help: &'static str,
    ) {
        self.sample_name.clear();
        self.sample_name.push_str(name);
        match kind {
            Kind::Gauge => {}
            Kind::Counter => self.sample_name.push_str("_total"),
            Kind::Info => self.sample_name.push_str("_info"),
        }
        let unit = unit.filter(|u| name.ends_with(&format!("_{u}")));
        self.pending = Some(Family {
            name,
            kind,
            unit,
            help,
        });
    }

    pub(crate) fn sample(&mut self, labels: &Labels<'_>, value: impl Into<Value>) {
        if let Some(f) = self.pending.take() {
            self.write_metadata(&f);
        }
        self.out.push_str(&self.sample_name);
        let mut first = true;
        for (k, v) in labels {
            // An empty label value means "no label" to Prometheus; leaving it
            // out keeps both formats identical to what the server stores.
            if v.is_empty() {
                continue;
            }
            self.out.push(if first { '{' } else { ',' });
            first = false;
            self.out.push_str(k);
            self.out.push_str("=\"");
            escape_into(&mut self.out, v, true);
            self.out.push('"');
        }
        if !first {
            self.out.push('}');
        }
        self.out.push(' ');
        match value.into() {
            Value::Int(i) => {
                let _ = write!(self.out, "{i}");
            }
            Value::Float(f) => write_float(&mut self.out, f),
        }
        self.out.push('\n');
    }

    pub(crate) fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }

    fn write_metadata(&mut self, f: &Family) {
        let (type_name, kind) = match (self.format, f.kind) {
            (Format::Prometheus, Kind::Gauge | Kind::Info) => (self.sample_name.as_str(), "gauge"),
            (Format::Prometheus, Kind::Counter) => (self.sample_name.as_str(), "counter"),
            (Format::OpenMetrics, Kind::Gauge) => (f.name, "gauge"),
            (Format::OpenMetrics, Kind::Counter) => (f.name, "counter"),
            (Format::OpenMetrics, Kind::Info) => (f.name, "info"),
        };
        let type_name = type_name.to_string();
        let _ = write!(self.out, "# HELP {type_name} ");
        escape_into(&mut self.out, f.help, self.format == Format::OpenMetrics);
        let _ = writeln!(self.out, "\n# TYPE {type_name} {kind}");
        if let (Format::OpenMetrics, Some(unit)) = (self.format, f.unit) {
            let _ = writeln!(self.out, "# UNIT {type_name} {unit}");
        }
    }
}

/// Label values (and OpenMetrics help) escape `\`, `"` and newline; 0.0.4 help
/// text leaves quotes alone.
fn escape_into(out: &mut String, s: &str, quotes: bool) {
    if !s.bytes().any(|b| matches!(b, b'\\' | b'\n' | b'"')) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f == f64::INFINITY {
        out.push_str("+Inf");
    } else if f == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each(format: Format) -> String {
        let mut e = Encoder::new(format);
        e.family("t_mem_bytes", Kind::Gauge, Some("bytes"), "Memory.");
        e.sample(&[("gpu", "0"), ("user", "")], 5u64);
        e.family(
            "t_empty_bytes",
            Kind::Gauge,
            Some("bytes"),
            "Never sampled.",
        );
        e.family("t_samples", Kind::Counter, None, "Ticks.");
        e.sample(&[], 3u64);
        e.family("t_build", Kind::Info, None, "Build.");
        e.sample(&[("v", "a\"b\\c\nd")], 1u64);
        e.family("t_ratio", Kind::Gauge, Some("ratio"), "Ratio.");
        e.sample(&[], f64::NAN);
        e.sample(&[("x", "y")], 0.25);
        e.finish()
    }

    #[test]
    fn prometheus_text_names_samples_and_types_alike() {
        let want = "\
# HELP t_mem_bytes Memory.
# TYPE t_mem_bytes gauge
t_mem_bytes{gpu=\"0\"} 5
# HELP t_samples_total Ticks.
# TYPE t_samples_total counter
t_samples_total 3
# HELP t_build_info Build.
# TYPE t_build_info gauge
t_build_info{v=\"a\\\"b\\\\c\\nd\"} 1
# HELP t_ratio Ratio.
# TYPE t_ratio gauge
t_ratio NaN
t_ratio{x=\"y\"} 0.25
";
        assert_eq!(one_of_each(Format::Prometheus), want);
    }

    #[test]
    fn openmetrics_uses_family_names_units_and_eof() {
        let want = "\
# HELP t_mem_bytes Memory.
# TYPE t_mem_bytes gauge
# UNIT t_mem_bytes bytes
t_mem_bytes{gpu=\"0\"} 5
# HELP t_samples Ticks.
# TYPE t_samples counter
t_samples_total 3
# HELP t_build Build.
# TYPE t_build info
t_build_info{v=\"a\\\"b\\\\c\\nd\"} 1
# HELP t_ratio Ratio.
# TYPE t_ratio gauge
# UNIT t_ratio ratio
t_ratio NaN
t_ratio{x=\"y\"} 0.25
# EOF
";
        assert_eq!(one_of_each(Format::OpenMetrics), want);
    }

    #[test]
    fn unit_is_dropped_when_the_name_does_not_carry_it() {
        let mut e = Encoder::new(Format::OpenMetrics);
        e.family("t_power", Kind::Gauge, Some("watts"), "P.");
        e.sample(&[], f64::INFINITY);
        assert_eq!(
            e.finish(),
            "# HELP t_power P.\n# TYPE t_power gauge\nt_power +Inf\n# EOF\n"
        );
    }
}
