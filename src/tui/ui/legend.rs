//! The legend: every abbreviation and glyph the screens draw, one line each. Help's second
//! page is generated from `LEGEND`; the screens this module's owner draws take their
//! symbols from the same entries, and tests/it/legend.rs fails when an entry no longer appears
//! on any screen of the bundled recordings, so the legend cannot drift from the screens.

/// One legend line: the symbol as drawn (Unicode and ASCII) and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub sym: &'static str,
    pub ascii: &'static str,
    pub meaning: &'static str,
}

impl Term {
    pub fn sym(&self, ascii: bool) -> &'static str {
        if ascii { self.ascii } else { self.sym }
    }
}

macro_rules! term {
    ($name:ident, $sym:literal, $ascii:literal, $meaning:literal) => {
        pub const $name: Term = Term {
            sym: $sym,
            ascii: $ascii,
            meaning: $meaning,
        };
    };
}

term!(
    PEAK,
    "PEAK",
    "PEAK",
    "(column) the most this process has used since gpumon saw it"
);
term!(
    USED,
    "used",
    "used",
    "memory in use now, as NVML reports it for the card or process"
);
term!(
    SM,
    "SM%",
    "SM%",
    "(column, o) its share of the GPU's compute (SMs) in NVML's last sample"
);
term!(
    CPU,
    "CPU%",
    "CPU%",
    "(column, o) host CPU over the last second; 100% is one core"
);
term!(
    RSS,
    "RSS",
    "RSS",
    "(column, o) host memory resident (not GPU memory)"
);
term!(
    TIME,
    "TIME",
    "TIME",
    "(column, o) how long the process has run (m:ss, h:mm:ss)"
);
term!(
    CONTAINER,
    "CONTAINER",
    "CONTAINER",
    "(column, o) its Kubernetes pod/container, or its container's id"
);
term!(
    GONE,
    "gone",
    "gone",
    "NVML stopped listing it: not yet known to have ended (see exited)"
);
term!(
    EXITED,
    "exited",
    "exited",
    "(USED) the process ended; OOM: of an OOM it reported; killed: no goodbye"
);
term!(
    NA,
    "n/a",
    "n/a",
    "not known (not reported yet, or not readable as this user)"
);
term!(
    CUDA,
    "cuda:1",
    "cuda:1",
    "the card's index inside the process (after CUDA_VISIBLE_DEVICES)"
);
term!(
    CUDA_Q,
    "cuda:1?",
    "cuda:1?",
    "index uncertain (e.g. CUDA_DEVICE_ORDER not PCI_BUS_ID)"
);
term!(
    HIDDEN,
    "hidden!",
    "hidden!",
    "the process uses a card its CUDA_VISIBLE_DEVICES hides"
);
term!(
    PID_AT,
    "pid@gpu",
    "pid@gpu",
    "an alert's process and GPU: 786@1 is PID 786 on GPU 1"
);
term!(
    COMPANION,
    "↳",
    "`-",
    "the process's allocator, as its companion reports it"
);
term!(
    ALLOC,
    "alloc",
    "alloc",
    "bytes the framework's allocator has handed out to tensors"
);
term!(
    CACHED,
    "cached",
    "cached",
    "bytes the allocator holds from CUDA but has not handed out"
);
term!(
    FRAG,
    "F",
    "F",
    "fragmentation index 1 - largest/all free (0..1); colour: OOM risk, not its size"
);
term!(
    STRANDED,
    "stranded",
    "stranded",
    "free cached bytes outside the largest free block; coloured like F, by the risk"
);
term!(
    LIMIT,
    "L … of T …",
    "L ... of T ...",
    "largest free block (L) of total free cached bytes (T)"
);
term!(
    EPOCH,
    "e0",
    "e0",
    "end of epoch 0, as the companion marked it (chart tick)"
);
term!(
    TICK,
    "╹e12",
    "^e12",
    "(detail, epochs row) where epoch 12 ended, under its place in the chart"
);
term!(
    FIT,
    "f: card scale",
    "f: card scale",
    "(card border) chart fitted to its data: 0–10 GiB of 140; f: full scale"
);
term!(
    ZOOM,
    "zoom all",
    "zoom all",
    "(under a value axis) the span of the time axis: all (history) or 10s … 7d; + - w"
);
term!(
    REFS,
    "peak … card …",
    "peak ... card ...",
    "(chart legend) peak and card total, dotted across the chart; ↑: above it"
);
term!(
    TRACES,
    "r resv a alloc",
    "r resv a alloc",
    "(process chart) reserved, allocated, epoch peak, floor (blocks without colour)"
);
term!(
    CHART_KEY,
    "c: card",
    "c: card",
    "(detail) c: chart the whole card or the selected process"
);
term!(
    HISTORY,
    "USED OVER TIME",
    "USED OVER TIME",
    "(wide cards) each process's usage over the window, to its own peak"
);
term!(
    CARD_MARK,
    "‼ 2 (card)",
    "!! 2 (card)",
    "(card border, GPU row) the card's worst active alert and their count"
);
term!(
    GAP,
    "╳",
    "x",
    "no sample (read failed): a gap, never a zero"
);
term!(
    PER_EPOCH,
    "+12.0M/ep",
    "+12.0M/ep",
    "growth per epoch (M = MiB); /10s or /win: per window of that length"
);
term!(
    EVIDENCE,
    "T L D R",
    "T L D R",
    "(alerts) T: free cached, L: largest hole, D: from card, R: largest request"
);
term!(
    EV_WORDS,
    "card, other",
    "card, other",
    "(alerts) card: free or total; other: other processes; allocator: its cap"
);
term!(
    BAR,
    "█▓▒░ |",
    "#+=. |",
    "(allocator bar) allocated, cached, outside allocator, unused; |: peak"
);
term!(
    MORE,
    "+2 more",
    "+2 more",
    "(alert bar) other active alerts (+2 when narrow); a lists them"
);
term!(
    SCROLLED,
    "+2 above",
    "+2 above",
    "rows of a list scrolled out of view above (k) or below (j) the ones shown"
);
term!(
    PER_MIN,
    "/m",
    "/m",
    "per minute: a process's growth over the last minute (shown when sorted by growth)"
);
term!(
    GATES,
    "gates ✓ …",
    "gates + ...",
    "statistical checks an alert passed (after ✓) or failed (after ✗)"
);
term!(
    SEV,
    "‼ ⚠ ℹ",
    "!! ! i",
    "alert severity: critical, warning, information"
);
term!(
    MARK,
    "⚠ on a row",
    "! on a row",
    "this process has an alert (dim, or on an ended one: a past alert)"
);
term!(
    PAST_MARK,
    "3 past (‼ 1)",
    "3 past (!! 1)",
    "(card border) ended alerts, then the worst and its count, as on the bar; until A"
);
term!(
    PAST,
    "✓ (alerts)",
    "ok (alerts)",
    "an alert that has ended (cleared or process exited)"
);
term!(
    ACK,
    "ack",
    "ack",
    "acknowledged: silenced until the alert worsens"
);
term!(
    SORT,
    "▼ ▲",
    "v ^",
    "sorted by this column, largest or smallest first (s, I)"
);
term!(
    REPLAY,
    "REPLAY",
    "REPLAY",
    "playing a recording; m:ss / m:ss is position / length"
);
term!(
    REC,
    "● REC",
    "* REC",
    "--record is writing everything to a file"
);
term!(
    FROZEN,
    "FROZEN",
    "FROZEN",
    "the view is frozen (p); sampling goes on"
);

term!(
    WINDOW,
    "│ all",
    "| all",
    "(header) the span charts and sparklines show (the zoom); + - w"
);
term!(
    INTERVAL,
    "│ 1 s │",
    "| 1 s |",
    "(header, live) how often NVML is sampled (--interval)"
);

/// Every entry, in the order help's legend page lists them.
pub const LEGEND: &[Term] = &[
    USED, PEAK, SM, CPU, RSS, TIME, CONTAINER, GONE, EXITED, NA, CUDA, CUDA_Q, HIDDEN, PID_AT,
    COMPANION, ALLOC, CACHED, FRAG, STRANDED, LIMIT, EPOCH, TICK, GAP, PER_EPOCH, PER_MIN, FIT,
    ZOOM, REFS, TRACES, CHART_KEY, HISTORY, GATES, EVIDENCE, EV_WORDS, BAR, SEV, MARK, CARD_MARK,
    PAST_MARK, PAST, ACK, MORE, SCROLLED, SORT, REPLAY, REC, FROZEN, WINDOW, INTERVAL,
];
