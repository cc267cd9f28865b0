//! How fast a replay plays: a factor of real time or as fast as it can be read, as typed
//! (`--speed 10`, `max`) and as the `<`/`>` keys step it.

/// A replay's speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    Times(f64),
    Max,
}

impl Speed {
    pub fn parse(s: &str) -> Result<Speed, String> {
        if s.eq_ignore_ascii_case("max") {
            return Ok(Speed::Max);
        }
        let v: f64 = s.trim_end_matches(['x', 'X']).parse().map_err(|_| {
            format!("invalid speed '{s}': use a factor such as 1, 10, 0.5 or 'max'")
        })?;
        // The range as it is: 0 itself is refused (a paused replay is Space in the TUI).
        if !(v.is_finite() && v > 0.0 && v <= 100_000.0) {
            return Err(format!(
                "invalid speed '{s}': must be above 0 and at most 100000 (e.g. 0.5, 1, 10), \
                 or 'max'"
            ));
        }
        Ok(Speed::Times(v))
    }

    pub fn label(&self) -> String {
        match self {
            Speed::Max => "max".into(),
            Speed::Times(v) if v.fract() == 0.0 => format!("{v:.0}x"),
            Speed::Times(v) => format!("{v}x"),
        }
    }

    pub fn faster(self) -> Speed {
        match self {
            Speed::Times(v) if v < 1024.0 => Speed::Times(v * 2.0),
            _ => Speed::Max,
        }
    }

    pub fn slower(self) -> Speed {
        match self {
            Speed::Max => Speed::Times(1024.0),
            Speed::Times(v) => Speed::Times((v / 2.0).max(0.125)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_parse_and_step() {
        assert_eq!(Speed::parse("max"), Ok(Speed::Max));
        assert_eq!(Speed::parse("10x"), Ok(Speed::Times(10.0)));
        assert!(Speed::parse("0").is_err());
        assert!(Speed::parse("fast").is_err());
        assert_eq!(Speed::Times(1.0).faster(), Speed::Times(2.0));
        assert_eq!(Speed::Max.slower(), Speed::Times(1024.0));
        assert_eq!(Speed::Times(0.5).label(), "0.5x");
    }
}
