//! Wording shared by the rules: step counts, p-values, who an alert is about, and the
//! 38-character summary limit (sizes and durations are `crate::fmt`'s).

use super::SUMMARY_MAX;

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

    #[test]
    fn steps_read_naturally() {
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
    fn p_values_read_naturally() {
        assert_eq!(p_value(1.0 / 720.0), "p = 0.0014");
        assert_eq!(p_value(1e-4), "p = 1.0e-4");
        assert_eq!(p_value(0.0083), "p = 0.0083");
    }
}
