//! Names that are stored as text (recordings, alert JSON) but that code matches on, typed
//! by `named!` (an enum per vocabulary, `Other` for a word this build does not know, the
//! same bare strings on disk). The protocol's own (`Framework`, `EventKind`, `Role`) and
//! the macro live in `wire::named`, where the messages use them.

pub(crate) use crate::wire::named;
pub use crate::wire::{EventKind, Framework, Role};

named! {
    /// Who a `Status` frame is from, shown before its text.
    pub enum StatusSource {
        Nvml = "nvml",
        Companion = "companion",
        Replay = "replay",
        Recorder = "recorder",
        /// A sink (flat log, alert log) that stopped.
        Output = "output",
        Alert = "alert",
        /// `--gpu/--user/--pid` that match nothing.
        Filter = "filter",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_bare_strings_and_unknown_ones_survive() {
        for &name in Framework::KNOWN {
            let f = Framework::from(name);
            assert!(!matches!(f, Framework::Other(_)), "{name}");
            let json = serde_json::to_string(&f).expect("serialises");
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Framework>(&json).expect("parses"), f);
        }
        let newer: Framework = serde_json::from_str("\"mxnet\"").expect("parses");
        assert_eq!(newer, Framework::Other("mxnet".into()));
        assert_eq!(newer.to_string(), "mxnet");
        assert_eq!(EventKind::from("oom"), EventKind::Oom);
        assert_eq!(StatusSource::from("nvml").as_str(), "nvml");
    }
}
