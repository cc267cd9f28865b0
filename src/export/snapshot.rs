//! The plain values a scrape needs, copied out of `State` by the event loop so
//! the HTTP side never touches the model and never waits on it.

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
                    ok: last.is_some() && g.error.is_none(),
                }
            })
            .collect();
        let mut procs = Vec::with_capacity(state.procs.len());
        for p in state.procs.values() {
            for pg in p.gpus.values() {
                procs.push(ProcRow {
                    gpu: pg.gpu,
                    pid: p.info.pid,
                    user: p.info.user.clone().unwrap_or_default(),
                    process: p.info.name.clone().unwrap_or_default(),
                    used: pg.last_used,
                    peak: peak(&pg.peak),
                });
            }
        }
        procs.sort_by_key(|r| (r.gpu, r.pid));
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
        }
    }
}
