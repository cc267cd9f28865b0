//! The words an alert's evidence is stored with: gate names, the series a trend was found
//! in, its step, where a forecast's ceiling comes from, and the named byte counts. Rules
//! build them (the retry rule rewrites the reading rule's), the alerts panel matches on
//! them for its one-word labels, recordings and `--alerts-jsonl` carry them as the same
//! bare strings as before (`named!`), and a word from another build loads as `Other`.

use crate::model::named::named;

named! {
    /// One effect-size or significance test a rule applied (`Gate.name`).
    pub enum GateName {
        // Growth (every trend window).
        MannKendallP = "Mann–Kendall p",
        Slope = "slope",
        Growth = "growth",
        GrowthVsNoise = "growth vs noise",
        Sustained = "sustained",
        NotAJump = "not a jump",
        /// Exact series: the median step carries the rise.
        MedianStep = "median step",
        /// The window's newest level tops the series' range before it.
        NewHigh = "new high",
        // Fragmentation risk.
        FitsTotal = "T ≥ R",
        FitsNoHole = "R > max(L, D)",
        FragIndex = "F = 1 − L/T",
        /// `FitsNoHole` judged on the hole at the step's peak (risk from retries).
        FitsNoHoleAtPeak = "R > L at the step's peak",
        Retries = "allocator retries in the last epochs",
        FreeShare = "T / reserved",
        // Cache-fit risk (a recurring request only the cache can serve).
        CacheOnly = "D < R: only the cache serves R",
        SpareHoles = "holes fitting R beyond a step's need",
        HoleMargin = "margin of the needed hole (just fits)",
        // Grab-all.
        HeldShare = "held share of card",
        AllocatorShare = "allocator share of held",
        HeldShareNvml = "held share of card (NVML only)",
        // Headroom.
        Headroom = "headroom < request",
        // Divergent rank.
        ExcessGrowth = "excess over peers grew vs their spread",
        Widening = "widening share of epochs",
    }
}

named! {
    /// Which series a trend was found in (`Evidence.series`).
    pub enum TrendSeries {
        /// Allocated at each epoch end.
        Floor = "floor",
        /// Highest allocated during each epoch.
        Peak = "peak",
        /// Reserved at each epoch end (cache growth).
        Reserved = "reserved",
        AllocatedWindows = "allocated (window minimum)",
        NvmlWindows = "NVML usage (window minimum)",
        InterposerWindows = "interposer live bytes (window minimum)",
        /// NVML usage at the markers of a companion that reads no framework.
        NvmlEpochs = "NVML usage at epoch markers",
    }
}

named! {
    /// The x unit of a trend's points and slope (`Evidence.unit`), as messages name it.
    pub enum StepUnit {
        Epoch = "epoch",
        /// A fixed time window (no epoch markers).
        Window = "window",
    }
}

named! {
    /// What a forecast's ceiling is (`Forecast.ceiling_source`), as messages name it.
    pub enum CeilingSource {
        AllocatorLimit = "allocator limit",
        /// What the process holds plus what the card still has free.
        CardNotHeld = "card memory not held by other processes",
        /// Nothing better known: the card's size.
        CardTotal = "card total",
    }
}

named! {
    /// A byte count in the evidence (`Named.name`).
    pub enum ValueName {
        FreeInCache = "T free in cache",
        LargestHole = "L largest hole",
        FromCard = "D from card",
        LargestRequest = "R largest request",
        Requested = "requested",
        CardFree = "card free",
        Reserved = "reserved",
        AllocatorLimit = "allocator limit",
        OtherProcesses = "other processes",
        HeldNvml = "held (NVML)",
        CardTotal = "card total",
        Allocated = "allocated",
        Headroom = "headroom",
        TypicalRequest = "typical request",
        RecurringRequest = "R recurring request",
        NeededHole = "hole R needs",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alerts::{Basis, Evidence, Forecast, Gate, Named, Point};

    /// Each name with the string literal the rules wrote before these enums existed.
    #[test]
    fn every_name_serialises_as_the_text_it_had() {
        let gates = [
            (GateName::MannKendallP, "Mann–Kendall p"),
            (GateName::Slope, "slope"),
            (GateName::Growth, "growth"),
            (GateName::GrowthVsNoise, "growth vs noise"),
            (GateName::Sustained, "sustained"),
            (GateName::NotAJump, "not a jump"),
            (GateName::FitsTotal, "T ≥ R"),
            (GateName::FitsNoHole, "R > max(L, D)"),
            (GateName::FragIndex, "F = 1 − L/T"),
            (GateName::FitsNoHoleAtPeak, "R > L at the step's peak"),
            (GateName::Retries, "allocator retries in the last epochs"),
            (GateName::FreeShare, "T / reserved"),
            (GateName::HeldShare, "held share of card"),
            (GateName::AllocatorShare, "allocator share of held"),
            (GateName::HeldShareNvml, "held share of card (NVML only)"),
            (GateName::Headroom, "headroom < request"),
            (GateName::MedianStep, "median step"),
            (GateName::CacheOnly, "D < R: only the cache serves R"),
            (GateName::SpareHoles, "holes fitting R beyond a step's need"),
            (
                GateName::HoleMargin,
                "margin of the needed hole (just fits)",
            ),
        ];
        for (name, old) in &gates {
            let g = Gate {
                name: name.clone(),
                value: 1.5,
                threshold: 0.0,
                passed: true,
            };
            let json = format!(r#"{{"name":"{old}","value":1.5,"threshold":0.0,"passed":true}}"#);
            assert_eq!(serde_json::to_string(&g).expect("serialises"), json);
            assert_eq!(serde_json::from_str::<Gate>(&json).expect("parses"), g);
        }

        let series = [
            (TrendSeries::Floor, "floor"),
            (TrendSeries::Peak, "peak"),
            (TrendSeries::Reserved, "reserved"),
            (TrendSeries::AllocatedWindows, "allocated (window minimum)"),
            (TrendSeries::NvmlWindows, "NVML usage (window minimum)"),
            (
                TrendSeries::InterposerWindows,
                "interposer live bytes (window minimum)",
            ),
            (TrendSeries::NvmlEpochs, "NVML usage at epoch markers"),
        ];
        let units = [(StepUnit::Epoch, "epoch"), (StepUnit::Window, "window")];
        let ceilings = [
            (CeilingSource::AllocatorLimit, "allocator limit"),
            (
                CeilingSource::CardNotHeld,
                "card memory not held by other processes",
            ),
            (CeilingSource::CardTotal, "card total"),
        ];
        let values = [
            (ValueName::FreeInCache, "T free in cache"),
            (ValueName::LargestHole, "L largest hole"),
            (ValueName::FromCard, "D from card"),
            (ValueName::LargestRequest, "R largest request"),
            (ValueName::Requested, "requested"),
            (ValueName::CardFree, "card free"),
            (ValueName::Reserved, "reserved"),
            (ValueName::AllocatorLimit, "allocator limit"),
            (ValueName::OtherProcesses, "other processes"),
            (ValueName::HeldNvml, "held (NVML)"),
            (ValueName::CardTotal, "card total"),
            (ValueName::Allocated, "allocated"),
            (ValueName::Headroom, "headroom"),
            (ValueName::TypicalRequest, "typical request"),
            (ValueName::RecurringRequest, "R recurring request"),
            (ValueName::NeededHole, "hole R needs"),
        ];
        let quoted = |s: &str| format!("\"{s}\"");
        for (v, old) in &series {
            assert_eq!(serde_json::to_string(v).expect("serialises"), quoted(old));
        }
        for (v, old) in &units {
            assert_eq!(serde_json::to_string(v).expect("serialises"), quoted(old));
        }
        for (v, old) in &ceilings {
            assert_eq!(serde_json::to_string(v).expect("serialises"), quoted(old));
            // Messages name the ceiling through Display.
            assert_eq!(v.to_string(), *old);
        }
        for (v, old) in &values {
            assert_eq!(serde_json::to_string(v).expect("serialises"), quoted(old));
        }
    }

    /// Every name, old or new, is written as its text and read back as itself (not as
    /// `Other`): a name added to its `named!` list needs no entry in the table above, which
    /// pins only the texts recordings already hold.
    #[test]
    fn every_name_round_trips_through_its_text() {
        fn check<T>(known: &[&str])
        where
            T: for<'a> From<&'a str> + serde::Serialize + std::fmt::Debug,
        {
            for &text in known {
                let v = T::from(text);
                let json = serde_json::to_string(&v).expect("serialises");
                assert_eq!(
                    json,
                    serde_json::to_string(text).expect("a string"),
                    "{v:?}"
                );
                assert!(
                    !format!("{v:?}").starts_with("Other("),
                    "{text} reads as {v:?}"
                );
            }
        }
        check::<GateName>(GateName::KNOWN);
        check::<TrendSeries>(TrendSeries::KNOWN);
        check::<StepUnit>(StepUnit::KNOWN);
        check::<CeilingSource>(CeilingSource::KNOWN);
        check::<ValueName>(ValueName::KNOWN);
    }

    /// A whole evidence object, written out as recordings and `--alerts-jsonl` had it.
    #[test]
    fn evidence_json_is_unchanged() {
        let ev = Evidence {
            basis: Basis::Epochs,
            series: Some(TrendSeries::Floor),
            unit: Some(StepUnit::Epoch),
            points: vec![Point {
                x: 5,
                t: 1_000,
                bytes: 133_719_040,
            }],
            slope: Some(33_554_432.0),
            p_value: Some(0.000_331_1),
            gates: vec![Gate {
                name: GateName::MannKendallP,
                value: 0.000_331_1,
                threshold: 0.01,
                passed: true,
            }],
            forecast: Some(Forecast {
                ceiling: 4_033_740_800,
                ceiling_source: CeilingSource::CardNotHeld,
                current: 1_401_783_296,
                rate: 33_554_432.0,
                steps: 78.44,
                ms: Some(162_449),
                at_epoch: Some(91.44),
            }),
            values: vec![Named {
                name: ValueName::FromCard,
                bytes: 33_554_432,
            }],
            count: None,
        };
        let old = concat!(
            r#"{"basis":"epochs","series":"floor","unit":"epoch","#,
            r#""points":[{"x":5,"t":1000,"bytes":133719040}],"slope":33554432.0,"#,
            r#""p_value":0.0003311,"gates":[{"name":"Mann–Kendall p","value":0.0003311,"#,
            r#""threshold":0.01,"passed":true}],"forecast":{"ceiling":4033740800,"#,
            r#""ceiling_source":"card memory not held by other processes","current":1401783296,"#,
            r#""rate":33554432.0,"steps":78.44,"ms":162449,"at_epoch":91.44},"#,
            r#""values":[{"name":"D from card","bytes":33554432}]}"#
        );
        assert_eq!(serde_json::to_string(&ev).expect("serialises"), old);
        assert_eq!(serde_json::from_str::<Evidence>(old).expect("parses"), ev);
        // A recording from a build with other words still loads, and keeps them.
        let newer = old
            .replace("\"floor\"", "\"swap\"")
            .replace("card memory not held by other processes", "host memory");
        let back: Evidence = serde_json::from_str(&newer).expect("parses");
        assert_eq!(back.series, Some(TrendSeries::Other("swap".into())));
        assert_eq!(serde_json::to_string(&back).expect("serialises"), newer);
    }
}
