//! Wording shared by the rules: compact sizes for summaries, rough durations for
//! forecasts, and the 38-character summary limit.

use crate::model::bytes::human;

use super::SUMMARY_MAX;

/// `96.0MiB`: `human` without the space, for summaries.
pub fn compact(bytes: u64) -> String {
    human(bytes).replace(' ', "")
}

/// `+96.0 MiB` for a rate that may be fractional or negative.
pub fn rate(bytes: f64) -> String {
    let sign = if bytes < 0.0 { "-" } else { "+" };
    format!("{sign}{}", human(bytes.abs().round() as u64))
}

/// Rough duration for forecasts: `~40 min`, `~31 h`, `~6 days`.
pub fn rough_duration(ms: i64) -> String {
    let min = ms.max(0) as f64 / 60_000.0;
    if min < 90.0 {
        format!("~{} min", min.round().max(1.0))
    } else if min < 48.0 * 60.0 {
        format!("~{} h", (min / 60.0).round())
    } else {
        format!("~{} days", (min / 1440.0).round())
    }
}

/// Compact duration for summaries: `40m`, `31h`, `6d`.
pub fn rough_duration_short(ms: i64) -> String {
    let min = ms.max(0) as f64 / 60_000.0;
    if min < 90.0 {
        format!("{}m", min.round().max(1.0))
    } else if min < 48.0 * 60.0 {
        format!("{}h", (min / 60.0).round())
    } else {
        format!("{}d", (min / 1440.0).round())
    }
}

/// Step counts as people say them: `≈ 140`, `≈ 3.5`, `< 1`.
pub fn steps(n: f64) -> String {
    if n < 1.0 {
        "< 1".into()
    } else if n < 10.0 {
        format!("≈ {:.1}", n)
    } else {
        format!("≈ {:.0}", n)
    }
}

/// `pid 4242` or `GPU 0` prefix for summaries.
pub fn who(pid: Option<u32>, gpu: u32) -> String {
    match pid {
        Some(p) => format!("{p}@{gpu}"),
        None => format!("GPU{gpu}"),
    }
}

/// Cut to `SUMMARY_MAX` characters, marking the cut.
pub fn fit_summary(s: String) -> String {
    if s.chars().count() <= SUMMARY_MAX {
        return s;
    }
    let mut out: String = s.chars().take(SUMMARY_MAX - 1).collect();
    out.push('…');
    out
}

/// `p = 0.0014`, `p < 1e-6`.
pub fn p_value(p: f64) -> String {
    if p < 1e-6 {
        "p < 1e-6".into()
    } else if p < 0.001 {
        format!("p = {p:.1e}")
    } else {
        format!("p = {p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bytes::MIB_U64;

    #[test]
    fn durations_and_steps_read_naturally() {
        assert_eq!(rough_duration(31 * 3_600_000), "~31 h");
        assert_eq!(rough_duration(40 * 60_000), "~40 min");
        assert_eq!(rough_duration(6 * 86_400_000), "~6 days");
        assert_eq!(rough_duration_short(31 * 3_600_000), "31h");
        assert_eq!(steps(140.2), "≈ 140");
        assert_eq!(steps(3.46), "≈ 3.5");
        assert_eq!(steps(0.2), "< 1");
    }

    #[test]
    fn summaries_are_cut_to_fit() {
        let long = "x".repeat(60);
        let cut = fit_summary(long);
        assert_eq!(cut.chars().count(), SUMMARY_MAX);
        assert!(cut.ends_with('…'));
        assert_eq!(fit_summary("short".into()), "short");
    }

    #[test]
    fn sizes_and_rates() {
        assert_eq!(compact(96 * MIB_U64), "96.0MiB");
        assert_eq!(rate(96.0 * MIB_U64 as f64), "+96.0 MiB");
        assert_eq!(p_value(1.0 / 720.0), "p = 0.0014");
        assert_eq!(p_value(1e-4), "p = 1.0e-4");
        assert_eq!(p_value(0.0083), "p = 0.0083");
    }
}
