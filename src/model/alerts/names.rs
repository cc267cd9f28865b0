//! The words an alert's evidence is stored with: gate names, the series a trend was found
//! in, its step, where a forecast's ceiling comes from, and the named byte counts. Rules
//! build them, the engine and the alerts panel match on them, recordings and
//! `--alerts-jsonl` carry them as the same bare strings as before (`named!`), and a word
//! from another build loads as `Other`.

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
        // Fragmentation risk.
        FitsTotal = "T ≥ R",
        FitsNoHole = "R > max(L, D)",
        FragIndex = "F = 1 − L/T",
        /// `FitsNoHole` judged on the hole at the step's peak (risk from retries).
        FitsNoHoleAtPeak = "R > L at the step's peak",
        Retries = "allocator retries in the last epochs",
        FreeShare = "T / reserved",
        // Grab-all.
        HeldShare = "held share of card",
        AllocatorShare = "allocator share of held",
        HeldShareNvml = "held share of card (NVML only)",
        // Headroom.
        Headroom = "headroom < request",
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
