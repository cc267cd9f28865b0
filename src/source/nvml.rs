//! NVML sampler: one dedicated thread owns the NVML instance and device handles
//! (created once), samples every interval and sends owned frames. It never
//! touches the UI and never creates a CUDA context.

use std::thread;
use std::time::{Duration, Instant};

use std::cell::RefCell;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper_sys::bindings::{nvmlProcessInfo_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE};
use tokio::sync::mpsc::Sender;

use crate::model::frame::{FORMAT_VERSION, Frame, Header};
use crate::model::sample::{GpuInfo, GpuSample, MemInfo, ProcKind, ProcSample, Tick};
use crate::model::time::now_ms;
use crate::source::proc_stats::ProcStats;
use crate::source::procfs;
use crate::source::seen::Seen;

/// Why live sampling is not possible (e.g. no driver): shown in one line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NvmlUnavailable {
    #[error("no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded): {0}")]
    NoLibrary(String),
    #[error("NVML failed to initialise: {0}")]
    Init(String),
    #[error("NVML reports no GPUs")]
    NoGpus,
}

/// Start sampling; returns the header (GPUs, driver) once NVML is up.
/// Frames go to `tx` (the loop's queue: its events are made from frames); the thread ends
/// when `tx` is closed.
pub(crate) fn spawn<E: From<Frame> + Send + 'static>(
    interval: Duration,
    tx: Sender<E>,
) -> Result<Header, NvmlUnavailable> {
    let (nvml, header) = open(interval)?;
    let sampled = header.clone();
    thread::Builder::new()
        .name("nvml-sampler".into())
        .spawn(move || run(&nvml, &sampled, interval, &tx))
        .map_err(|e| NvmlUnavailable::Init(e.to_string()))?;
    Ok(header)
}

/// One sample of everything, for `gpumon snapshot`.
pub(crate) fn snapshot()
-> Result<(Header, Tick, Vec<crate::model::sample::ProcInfo>), NvmlUnavailable> {
    let (nvml, header) = open(Duration::from_secs(1))?;
    let devices = handles(&nvml, &header);
    let tick = sample_all(&devices);
    let mut pids: Vec<u32> = tick
        .gpus
        .iter()
        .flat_map(|g| g.procs.iter().map(|p| p.pid))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let procs = pids.into_iter().map(procfs::read).collect();
    Ok((header, tick, procs))
}

/// NVML opened on a thread of its own that ends at once, the instance boxed. Its binding
/// table (one entry per NVML function) is ~40 kB, built on the stack and moved by value a few
/// times on the way out: opened on the caller's thread, that left the main thread's stack
/// ~130 kB deep, and a stack's pages stay resident for the life of the process (they were
/// most of its 172 kB of stack on the H200). A thread that ends gives its stack's
/// pages back (glibc drops them when the thread exits); a failure still comes back as it is,
/// and no sampler thread is started when there is nothing to sample. A process that cannot
/// start this thread could not start the sampler's either: that is the same error.
fn open(interval: Duration) -> Result<(Box<Nvml>, Header), NvmlUnavailable> {
    thread::Builder::new()
        .name("nvml-open".into())
        .spawn(move || Sampler::init(interval).map(|(nvml, header)| (Box::new(nvml), header)))
        .map_err(|e| NvmlUnavailable::Init(e.to_string()))?
        .join()
        .unwrap_or_else(|_| Err(NvmlUnavailable::Init("NVML panicked while opening".into())))
}

struct Sampler;

impl Sampler {
    fn init(interval: Duration) -> Result<(Nvml, Header), NvmlUnavailable> {
        let nvml = Nvml::init().map_err(|e| match e {
            NvmlError::LibloadingError(l) => NvmlUnavailable::NoLibrary(l.to_string()),
            NvmlError::FailedToLoadSymbol(s) => NvmlUnavailable::NoLibrary(s),
            NvmlError::DriverNotLoaded => NvmlUnavailable::NoLibrary("driver not loaded".into()),
            other => NvmlUnavailable::Init(other.to_string()),
        })?;
        let count = nvml
            .device_count()
            .map_err(|e| NvmlUnavailable::Init(e.to_string()))?;
        if count == 0 {
            return Err(NvmlUnavailable::NoGpus);
        }
        let mut gpus = Vec::new();
        for index in 0..count {
            // A device that cannot even be opened is listed with what is known, so the rest works.
            let info = match nvml.device_by_index(index) {
                Ok(d) => GpuInfo {
                    index,
                    name: d.name().unwrap_or_else(|_| format!("GPU {index}")),
                    uuid: d.uuid().unwrap_or_default(),
                    pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                    memory_total: d.memory_info().map(|m| m.total).unwrap_or(0),
                    mig_uuids: mig_uuids(&d),
                },
                Err(_) => GpuInfo {
                    index,
                    name: format!("GPU {index} (unreadable)"),
                    uuid: String::new(),
                    pci_bus_id: String::new(),
                    memory_total: 0,
                    mig_uuids: vec![],
                },
            };
            gpus.push(info);
        }
        let header = Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: hostname(),
            driver_version: nvml.sys_driver_version().ok(),
            nvml_version: nvml.sys_nvml_version().ok(),
            cuda_version: nvml
                .sys_cuda_driver_version()
                .ok()
                .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
            started: now_ms(),
            interval_ms: interval.as_millis() as u64,
            gpus,
            gpumon_version: env!("CARGO_PKG_VERSION").into(),
        };
        Ok((nvml, header))
    }
}

fn mig_uuids(d: &nvml_wrapper::Device<'_>) -> Vec<String> {
    let Ok(n) = d.mig_device_count() else {
        return vec![];
    };
    (0..n)
        .filter_map(|i| d.mig_device_by_index(i).ok()?.uuid().ok())
        .collect()
}

fn handles<'a>(nvml: &'a Nvml, header: &Header) -> Vec<(u32, Option<nvml_wrapper::Device<'a>>)> {
    header
        .gpus
        .iter()
        .map(|g| (g.index, nvml.device_by_index(g.index).ok()))
        .collect()
}

/// Process lists, utilisation, temperature and power change slowly and cost more than the
/// memory query; at short intervals they are refreshed at most this often and carried over.
const SLOW_REFRESH: Duration = Duration::from_millis(200);
/// Short-interval ticks reach the event loop in bursts at most this often. The screen
/// redraws data at most once a second and alerts are judged once a second, so a burst a
/// second shows the same; at 100 ms sampling it wakes the loop once a second instead of 10
/// times. Each wake-up of a thread costs ~50-90 us on the virtual machines measured (issue
/// 21: schedstat and strace), more than the loop's work for the ticks it brings.
const BATCH: Duration = Duration::from_secs(1);
/// How often a process already listed is checked for a reused pid (its start time in
/// /proc, ~10 us a process): once a second, not on every full tick, whatever the interval.
/// A new pid is read at once.
const REUSE_CHECK: Duration = Duration::from_secs(1);

fn run<E: From<Frame>>(nvml: &Nvml, header: &Header, interval: Duration, tx: &Sender<E>) {
    let devices = handles(nvml, header);
    // The pids read, so a reused pid gets its /proc facts read again.
    let mut seen = Seen::default();
    let mut stats = ProcStats::new("/proc");
    let slow_every = (SLOW_REFRESH.as_micros() / interval.as_micros().max(1)).max(1) as u64;
    let mut prev: Vec<GpuSample> = Vec::new();
    let mut n: u64 = 0;
    let mut pending: Vec<Frame> = Vec::new();
    let mut last_flush = Instant::now() - BATCH;
    let mut last_reuse_check = Instant::now() - REUSE_CHECK;
    let mut next = Instant::now();
    loop {
        let full = n.is_multiple_of(slow_every);
        n += 1;
        let t = now_ms();
        let mut gpus: Vec<GpuSample> = devices
            .iter()
            .map(|(index, dev)| {
                let carried = prev.iter().find(|p| p.index == *index && p.error.is_none());
                match (dev, carried) {
                    (Some(d), Some(c)) if !full => sample_fast(*index, d, c),
                    (Some(d), c) => sample_one(*index, d, c),
                    (None, _) => failed(*index, "device handle unavailable".into()),
                }
            })
            .collect();
        let mut fresh = Vec::new();
        if full {
            let check_reuse =
                last_reuse_check.elapsed() >= REUSE_CHECK.saturating_sub(interval / 2);
            if check_reuse {
                last_reuse_check = Instant::now();
            }
            let listed: Vec<u32> = gpus.iter().flat_map(|g| &g.procs).map(|p| p.pid).collect();
            fresh = seen.fresh(&listed, check_reuse);
        }
        if full {
            let sm = |gpu: u32, since: u64| {
                let d = devices
                    .iter()
                    .find(|(i, _)| *i == gpu)
                    .and_then(|(_, d)| d.as_ref());
                let d = d.ok_or(NvmlError::NotSupported)?;
                let samples = d.process_utilization_stats(since)?;
                Ok(samples
                    .iter()
                    .map(|u| (u.pid, u.timestamp, u.sm_util))
                    .collect())
            };
            stats.apply(Instant::now(), sm, &mut gpus);
            // Fast ticks only carry what full ticks read; keep just those.
            prev.clone_from(&gpus);
        }
        if !fresh.is_empty() {
            pending.push(Frame::Procs { t, procs: fresh });
        }
        pending.push(Frame::Tick(Tick { t, gpus }));
        // At short intervals ticks travel in bursts: every sample reaches the model, but
        // the event loop wakes about once a second for them. Half a tick of slack: a burst
        // due on this tick is not put off to the next by jitter.
        if last_flush.elapsed() >= BATCH.saturating_sub(interval / 2) {
            for f in pending.drain(..) {
                if tx.blocking_send(f.into()).is_err() {
                    return;
                }
            }
            last_flush = Instant::now();
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            thread::sleep(next - now);
        } else {
            // Fell behind (suspended laptop, overloaded box): skip missed ticks rather than burst.
            next = now;
        }
    }
}

fn sample_all(devices: &[(u32, Option<nvml_wrapper::Device<'_>>)]) -> Tick {
    let t = now_ms();
    let gpus = devices
        .iter()
        .map(|(index, dev)| match dev {
            Some(d) => sample_one(*index, d, None),
            None => failed(*index, "device handle unavailable".into()),
        })
        .collect();
    Tick { t, gpus }
}

fn failed(index: u32, error: String) -> GpuSample {
    GpuSample {
        index,
        mem: None,
        util: None,
        temp_c: None,
        power_mw: None,
        procs: vec![],
        error: Some(error),
    }
}

fn read_mem(d: &nvml_wrapper::Device<'_>) -> Result<MemInfo, String> {
    match d.memory_info() {
        Ok(m) => Ok(MemInfo {
            total: m.total,
            used: m.used,
            free: m.free,
            reserved: m.reserved,
        }),
        Err(NvmlError::GpuLost) => Err("GPU has fallen off the bus".into()),
        Err(e) => Err(format!("memory query failed: {e}")),
    }
}

/// Memory only; everything else carried from the last full sample.
fn sample_fast(index: u32, d: &nvml_wrapper::Device<'_>, carried: &GpuSample) -> GpuSample {
    match read_mem(d) {
        Ok(mem) => GpuSample {
            mem: Some(mem),
            ..carried.clone()
        },
        Err(e) => failed(index, e),
    }
}

fn sample_one(index: u32, d: &nvml_wrapper::Device<'_>, carried: Option<&GpuSample>) -> GpuSample {
    let mem = match read_mem(d) {
        Ok(m) => m,
        Err(e) => return failed(index, e),
    };
    let mut procs: Vec<ProcSample> = Vec::new();
    let mut list_failed = false;
    let mut merge = |list: Result<Vec<ProcessInfo>, NvmlError>, kind: ProcKind| {
        let list = match list {
            Ok(l) => l,
            Err(NvmlError::NotSupported) => Vec::new(),
            Err(_) => {
                list_failed = true;
                Vec::new()
            }
        };
        for p in list {
            let used = match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            };
            match procs.iter_mut().find(|q| q.pid == p.pid) {
                Some(q) => {
                    q.kind = ProcKind::Both;
                    q.used = q.used.max(used);
                }
                None => procs.push(ProcSample {
                    pid: p.pid,
                    kind,
                    used,
                    ..ProcSample::default()
                }),
            }
        }
    };
    merge(process_list(d, ProcKind::Compute), ProcKind::Compute);
    merge(process_list(d, ProcKind::Graphics), ProcKind::Graphics);
    // A failed process query is not "every process exited": keep the last known list.
    if list_failed && let Some(c) = carried {
        procs.clone_from(&c.procs);
    }
    GpuSample {
        index,
        mem: Some(mem),
        util: d.utilization_rates().ok().map(|u| u.gpu),
        temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
        power_mw: d.power_usage().ok(),
        procs,
        error: None,
    }
}

thread_local! {
    /// The sampler thread's process-list buffer, kept between ticks.
    static PROC_BUF: RefCell<Vec<nvmlProcessInfo_t>> = const { RefCell::new(Vec::new()) };
}

/// Most entries a process list is grown to (NVML's own limit is far lower).
const MAX_PROCS: usize = 1 << 14;

/// A process list in one NVML call, where `Device::running_compute_processes` makes two
/// (the count, then the list into a new buffer). Process lists are the dearest calls of a
/// tick (~40 us each), and the bare poller gpumon is measured against (bench/nvml_poll.c)
/// makes one call with a fixed buffer. The buffer is kept and grown only when NVML says it
/// is too small.
fn process_list(
    d: &nvml_wrapper::Device<'_>,
    kind: ProcKind,
) -> Result<Vec<ProcessInfo>, NvmlError> {
    let lib = d.nvml().lib();
    let sym = match kind {
        ProcKind::Graphics => &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
        _ => &lib.nvmlDeviceGetComputeRunningProcesses_v3,
    };
    let f = *sym
        .as_ref()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    PROC_BUF.with_borrow_mut(|buf| {
        if buf.is_empty() {
            // SAFETY: a plain C struct of integers; all zeroes is a valid value.
            buf.resize(16, unsafe { std::mem::zeroed() });
        }
        loop {
            let mut count = buf.len() as std::os::raw::c_uint;
            // SAFETY: the handle lives as long as `d`; NVML writes at most `count` entries
            // into `buf`, which holds that many.
            let code = unsafe { f(d.handle(), &mut count, buf.as_mut_ptr()) };
            if code == nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE && buf.len() < MAX_PROCS {
                // More processes than room: NVML said how many; leave headroom for new ones.
                let want = (count as usize + 8).max(buf.len() * 2).min(MAX_PROCS);
                // SAFETY: as above.
                buf.resize(want, unsafe { std::mem::zeroed() });
                continue;
            }
            nvml_try(code)?;
            let n = (count as usize).min(buf.len());
            return Ok(buf[..n].iter().map(|p| ProcessInfo::from(*p)).collect());
        }
    })
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
