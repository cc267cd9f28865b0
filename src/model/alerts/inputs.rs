//! Plain inputs the rules read: one snapshot of the world at one instant. Built from
//! `State` by `from_state`, or by hand in tests and synthetic benchmarks.

use crate::model::named::Framework;
use crate::model::time::Ts;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub now: Ts,
    pub gpus: Vec<GpuView>,
    pub procs: Vec<ProcView>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuView {
    pub index: u32,
    pub total: u64,
    /// NVML free now; `None` when the last tick failed.
    pub free: Option<u64>,
}

/// One process on one GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcView {
    pub pid: u32,
    /// NVML index.
    pub gpu: u32,
    /// NVML per-process usage now (`None`: not reported).
    pub nvml_used: Option<u64>,
    /// Lowest NVML usage over the grab-all persistence period, when the series covers it.
    pub nvml_used_min_recent: Option<u64>,
    /// Completed fixed windows of NVML usage (minimum of each), oldest first, warm-up excluded
    /// (`from_state` leaves them out when the companion gives epochs: they are not read then).
    pub nvml_windows: Vec<WindowPoint>,
    /// Epoch markers from a companion that could read no framework (CuPy, a CUDA library it
    /// does not know): the floor of each is NVML's usage at the marker.
    pub nvml_epochs: Vec<EpochPoint>,
    pub companion: Option<CompanionView>,
    /// The process is gone: NVML no longer lists it and its companion left (or never was).
    pub exited: bool,
    /// Its rank, and the distributed job it is a rank of (`model::job::Job::id`).
    pub rank: Option<u32>,
    pub job: Option<String>,
}

/// One fixed time window: its index, end time and minimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowPoint {
    pub index: i64,
    pub t: Ts,
    pub min: u64,
}

/// One completed epoch as the companion reports it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EpochPoint {
    pub epoch: u64,
    /// When the epoch ended.
    pub t: Ts,
    /// Allocated at the epoch-end marker.
    pub floor: u64,
    /// Highest allocated during the epoch.
    pub peak: Option<u64>,
    pub reserved: Option<u64>,
}

/// Framework and allocator, for advice that names the right remedy.
#[derive(Debug, Clone, PartialEq)]
pub struct Runtime {
    pub framework: Framework,
    /// `native`, `expandable_segments`, `cudaMallocAsync`, `bfc`, ...
    pub allocator: Option<String>,
}

#[cfg(test)]
impl Runtime {
    /// PyTorch's native caching allocator, the rules' tests' usual runtime.
    pub(crate) fn torch_native() -> Runtime {
        Runtime {
            framework: Framework::Torch,
            allocator: Some("native".into()),
        }
    }
}

impl Default for Runtime {
    /// A companion that has not named its framework: the empty name, as `from_state`
    /// reads a hello without one (no framework-specific advice).
    fn default() -> Self {
        Runtime {
            framework: Framework::from(""),
            allocator: None,
        }
    }
}

/// The lowest and highest floor, peak and reserved of a process's usable epochs older than
/// those in `CompanionView::epochs`, within `growth.envelope_epochs`: the range a new trend
/// must leave (the old epochs themselves are not carried).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Envelope {
    pub floor: Option<(u64, u64)>,
    pub peak: Option<(u64, u64)>,
    pub reserved: Option<(u64, u64)>,
}

impl Envelope {
    /// Widens the ranges by one epoch's values.
    pub fn take(&mut self, floor: u64, peak: Option<u64>, reserved: Option<u64>) {
        fn widen(r: &mut Option<(u64, u64)>, v: u64) {
            *r = Some(r.map_or((v, v), |(l, h)| (l.min(v), h.max(v))));
        }
        widen(&mut self.floor, floor);
        if let Some(p) = peak {
            widen(&mut self.peak, p);
        }
        if let Some(r) = reserved {
            widen(&mut self.reserved, r);
        }
    }
}

/// Allocator state for a process on one device, from its companion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompanionView {
    pub runtime: Runtime,
    /// Completed epochs, oldest first (the newest the trend tests read).
    pub epochs: Vec<EpochPoint>,
    /// The range of the usable epochs before those.
    pub envelope: Envelope,
    /// Epoch in progress (from the latest sample or marker).
    pub current_epoch: Option<u64>,
    /// Last epoch of the run, when the framework announced it.
    pub last_epoch: Option<u64>,
    /// Points before this time are ignored (config change: batch size, allocator settings).
    pub baseline_from: Option<Ts>,
    /// Completed fixed windows of `allocated` (minimum of each) for runs without epoch markers
    /// (empty when there are epochs).
    pub allocated_windows: Vec<WindowPoint>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    /// Allocator limit (PyTorch memory fraction × total, JAX bytes_limit, TF memory_limit).
    pub limit: Option<u64>,
    pub frag: Option<FragView>,
    /// Largest single allocation the workload makes (allocator counter or block map).
    pub largest_alloc: Option<u64>,
    /// OOM events, oldest first (the engine remembers which it has seen).
    pub ooms: Vec<OomEvent>,
    /// PyTorch `num_alloc_retries`: cudaMalloc failed and the cache was flushed to retry.
    pub retries: Option<u64>,
    /// The allocator's policy in the companion's words, and its settings (environment
    /// variables and framework options), for grab-all by policy.
    pub policy: Option<String>,
    pub settings: Vec<(String, String)>,
    /// The numbers come from the native interposer: live bytes are exact (no cache).
    pub interposer: bool,
}

/// Latest free-pool view: T, L and the largest live block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FragView {
    pub t: Ts,
    /// T: free bytes held by the allocator.
    pub free_total: u64,
    /// L: largest free block (`None` where the framework cannot tell, e.g. TensorFlow).
    pub largest_free: Option<u64>,
    /// Largest live allocation (a lower bound for the workload's largest request).
    pub largest_block: Option<u64>,
    /// Free blocks per log2 bucket `(k, count, bytes)`, when the block map was read.
    pub hist: Option<Vec<(u32, u64, u64)>>,
    /// The largest free and live blocks, exact, largest first (empty from older companions).
    pub free_top: Vec<u64>,
    pub live_top: Vec<u64>,
    /// Large sizes the program allocated anew in several snapshots: `(size, times)`.
    pub requests: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OomEvent {
    pub t: Ts,
    pub requested: Option<u64>,
    /// T at the time of the OOM, when the companion knew it.
    pub free_total: Option<u64>,
    pub largest_free: Option<u64>,
    pub device_free: Option<u64>,
    /// The allocator limit the event reported (PyTorch memory fraction × total, ...).
    pub limit: Option<u64>,
    /// What the allocator had reserved as it made the failing request.
    pub reserved: Option<u64>,
    pub epoch: Option<u64>,
}

impl ProcView {
    /// What this process can still get from the card: NVML free, capped by its allocator
    /// limit minus what it already reserved.
    pub fn device_avail(&self, gpu_free: Option<u64>) -> Option<u64> {
        let limit_left = self
            .companion
            .as_ref()
            .and_then(|c| Some(c.limit?.saturating_sub(c.reserved?)));
        match (gpu_free, limit_left) {
            (Some(f), Some(l)) => Some(f.min(l)),
            (Some(f), None) => Some(f),
            (None, l) => l,
        }
    }
}
