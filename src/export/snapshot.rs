//! The plain values a scrape needs, copied out of `State` by the event loop so
//! the HTTP side never touches the model and never waits on it.

use crate::model::allocator::DevAlloc;
use crate::model::sample::MemInfo;
use crate::model::series::Peak;
use crate::model::state::State;
use crate::model::time::Ts;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuRow {
    pub index: u32,
    pub uuid: String,
    pub pci_bus_id: String,
    pub name: String,
    pub total: u64,
    pub mem: Option<MemInfo>,
    pub util_percent: Option<u32>,
    pub temp_c: Option<u32>,
    pub power_mw: Option<u32>,
    pub peak_used: Option<u64>,
    /// False while the newest tick could not read this device.
    pub ok: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcRow {
    pub gpu: u32,
    pub pid: u32,
    pub user: String,
    pub process: String,
    /// `None` while NVML does not list the process or cannot say: absent, never 0.
    pub used: Option<u64>,
    pub peak: Option<u64>,
    /// Rank in a distributed job, Kubernetes pod: extra labels when known.
    pub placement: crate::model::placement::Placement,
}

/// Allocator facts from a companion, for one process on one physical GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocRow {
    pub gpu: u32,
    pub pid: u32,
    pub user: String,
    pub process: String,
    pub placement: crate::model::placement::Placement,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub cached: Option<u64>,
    pub peak_allocated: Option<u64>,
    pub peak_reserved: Option<u64>,
    pub limit: Option<u64>,
    pub free_total: Option<u64>,
    pub largest_free: Option<u64>,
    pub frag_index: Option<f64>,
    pub free_blocks: Option<u64>,
    /// `(k, count, bytes)`: free blocks of `2^k ..< 2^(k+1)` bytes.
    pub free_hist: Vec<(u32, u64, u64)>,
    /// The epoch in progress, as the companion's samples report it.
    pub epoch: Option<u64>,
    /// Number, floor and peak of the last completed epoch.
    pub last_epoch: Option<u64>,
    pub epoch_floor: Option<u64>,
    pub epoch_peak: Option<u64>,
    pub ooms: Option<u64>,
    pub alloc_retries: Option<u64>,
    /// The companion's last sample as it was sent: a field it carries as it is needs no
    /// copy here, only its row in `allocator::ALLOC_VALUES`.
    pub sample: Option<crate::wire::Sample>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub hostname: String,
    pub gpumon_version: String,
    pub driver_version: String,
    pub cuda_version: String,
    pub ticks: u64,
    /// Data time of the newest frame (0 before any).
    pub now: Ts,
    pub gpus: Vec<GpuRow>,
    pub procs: Vec<ProcRow>,
    pub allocs: Vec<AllocRow>,
}

fn peak(p: &Peak) -> Option<u64> {
    // `Peak` starts at time 0 and takes its first observation whatever its value.
    (p.at != 0).then_some(p.value)
}

impl Snapshot {
    /// The recording's host describes the data (a replay shows the machine that
    /// recorded it); `fallback` is used before any header arrived.
    pub fn from_state(state: &State, fallback_hostname: &str) -> Snapshot {
        let header = state.header.as_ref();
        let hostname = header
            .map(|h| h.host.as_str())
            .filter(|h| !h.is_empty())
            .unwrap_or(fallback_hostname);
        let gpus = state
            .gpus
            .iter()
            .map(|g| {
                let last = g.last.as_ref();
                GpuRow {
                    index: g.info.index,
                    uuid: g.info.uuid.clone(),
                    pci_bus_id: g.info.pci_bus_id.clone(),
                    name: g.info.name.clone(),
                    total: g.total(),
                    mem: last.and_then(|s| s.mem),
                    util_percent: last.and_then(|s| s.util),
                    temp_c: last.and_then(|s| s.temp_c),
                    power_mw: last.and_then(|s| s.power_mw),
                    peak_used: peak(&g.peak),
                    ok: last.is_some() && g.error().is_none(),
                }
            })
            .collect();
        let mut procs = Vec::with_capacity(state.procs.len());
        let jobs = state.jobs();
        for p in state.procs.values().filter(|p| state.exported(p)) {
            for pg in p.gpus.values() {
                procs.push(ProcRow {
                    gpu: pg.gpu,
                    pid: p.info.pid,
                    user: p.info.user.clone().unwrap_or_default(),
                    process: p.who.label.clone().unwrap_or_default(),
                    used: pg.last_used,
                    peak: peak(&pg.peak),
                    placement: placement(state, &jobs, p.info.pid),
                });
            }
        }
        procs.sort_by_key(|r| (r.gpu, r.pid));
        let allocs = alloc_rows(state);
        Snapshot {
            hostname: hostname.to_string(),
            gpumon_version: env!("CARGO_PKG_VERSION").to_string(),
            driver_version: header
                .and_then(|h| h.driver_version.clone())
                .unwrap_or_default(),
            cuda_version: header
                .and_then(|h| h.cuda_version.clone())
                .unwrap_or_default(),
            ticks: state.ticks,
            now: state.now,
            gpus,
            procs,
            allocs,
        }
    }
}

/// Companion devices matched to physical GPUs (`State::alloc_on`); a device that matches
/// none is left out, since without a GPU its series could not be told apart across processes.
pub(super) fn alloc_rows(state: &State) -> Vec<AllocRow> {
    let mut rows = Vec::new();
    let jobs = state.jobs();
    for &pid in state.companions.by_pid.keys() {
        let info = state.procs.get(&pid).map(|p| &p.info);
        // /proc's facts, else what the companion's hello sent (a process /proc cannot
        // read, in another container).
        let process = match state.procs.get(&pid) {
            Some(p) => p.who.label.clone(),
            None => {
                let hello = state.companions.get(pid).and_then(|p| p.hello.as_ref());
                let bare = crate::model::sample::ProcInfo {
                    pid,
                    ..Default::default()
                };
                crate::model::job::Identity::of(&bare, hello).label
            }
        }
        .unwrap_or_default();
        for (gpu, d) in state.live_allocs_of(pid) {
            rows.push(alloc_row(
                gpu,
                pid,
                placement(state, &jobs, pid),
                info.and_then(|i| i.user.clone()).unwrap_or_default(),
                process.clone(),
                d,
            ));
        }
    }
    rows.sort_by_key(|r| (r.gpu, r.pid));
    rows
}

/// Rank from the companion's hello, else from the environment /proc shows (a launcher's
/// `RANK`, else Slurm's task id); the job it is a rank of; Kubernetes and Slurm labels from
/// /proc.
fn placement(
    state: &State,
    jobs: &[crate::model::job::Job],
    pid: u32,
) -> crate::model::placement::Placement {
    let hello = state.companions.get(pid).and_then(|p| p.hello.as_ref());
    let info = state.procs.get(&pid).map(|p| &p.info);
    let slurm = info.and_then(|i| i.slurm.clone());
    crate::model::placement::Placement {
        rank: hello
            .and_then(|h| h.rank)
            .or(info.and_then(|i| i.rank))
            .or(slurm.as_ref().and_then(|s| s.rank())),
        local_rank: hello
            .and_then(|h| h.local_rank)
            .or(info.and_then(|i| i.local_rank))
            .or(slurm.as_ref().and_then(|s| s.local_rank())),
        job: jobs.iter().find(|j| j.has(pid)).map(|j| j.id.clone()),
        kube: info.and_then(|i| i.kube.clone()),
        slurm,
    }
}

fn alloc_row(
    gpu: u32,
    pid: u32,
    placement: crate::model::placement::Placement,
    user: String,
    process: String,
    d: &DevAlloc,
) -> AllocRow {
    let last = d.last.as_ref();
    let frag = d.frag.as_ref();
    let last_epoch = d.epochs.back();
    AllocRow {
        gpu,
        pid,
        placement,
        user,
        process,
        allocated: d.allocated_now(),
        reserved: d.reserved_now(),
        cached: d.cached_now(),
        peak_allocated: d.peak_allocated(),
        peak_reserved: d.peak_reserved(),
        limit: d.limit(),
        free_total: frag.and_then(|f| f.free_total),
        largest_free: frag.and_then(|f| f.largest_free),
        frag_index: frag.and_then(|f| f.index()),
        free_blocks: frag.and_then(|f| f.n_free_blocks),
        free_hist: frag.and_then(|f| f.hist.clone()).unwrap_or_default(),
        epoch: last.and_then(|s| s.epoch),
        last_epoch: last_epoch.map(|e| e.epoch),
        epoch_floor: last_epoch.and_then(|e| e.floor),
        epoch_peak: last_epoch.and_then(|e| e.peak),
        ooms: last.and_then(|s| s.num_ooms),
        alloc_retries: last.and_then(|s| s.num_alloc_retries),
        sample: last.cloned(),
    }
}
