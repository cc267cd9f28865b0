//! Metric names, types, units and labels (docs/metrics.md is the reference),
//! rendered from a `Snapshot` in either exposition format.

use super::alerts::{self, AlertRow};
use super::allocator;
use super::encode::{Encoder, Format, Kind, Value};
use super::snapshot::{GpuRow, ProcRow, Snapshot};

/// Per-GPU label values, formatted once per scrape.
pub(super) struct GpuLabels<'a> {
    gpu: String,
    uuid: &'a str,
    pci_bus_id: &'a str,
}

pub fn render(s: &Snapshot, alerts: &[AlertRow], format: Format) -> String {
    let mut e = Encoder::new(format);
    let host = s.hostname.as_str();
    let gpu_labels: Vec<GpuLabels<'_>> = s
        .gpus
        .iter()
        .map(|g| GpuLabels {
            gpu: g.index.to_string(),
            uuid: &g.uuid,
            pci_bus_id: &g.pci_bus_id,
        })
        .collect();

    e.family("gpumon", Kind::Info, None, "gpumon build and data source.");
    e.sample(
        &[
            ("hostname", host),
            ("version", &s.gpumon_version),
            ("driver_version", &s.driver_version),
            ("cuda_version", &s.cuda_version),
        ],
        1u64,
    );
    e.family(
        "gpumon_up",
        Kind::Gauge,
        None,
        "1 once the source has delivered a sample, else 0.",
    );
    e.sample(&[("hostname", host)], u64::from(s.ticks > 0));
    e.family(
        "gpumon_samples",
        Kind::Counter,
        None,
        "Sampler ticks applied to the model.",
    );
    e.sample(&[("hostname", host)], s.ticks);
    if s.now > 0 {
        e.family(
            "gpumon_last_sample_timestamp_seconds",
            Kind::Gauge,
            Some("seconds"),
            "Data time of the newest sample, Unix seconds (for staleness alerts).",
        );
        e.sample(&[("hostname", host)], s.now as f64 / 1000.0);
    }

    e.family("gpumon_gpu", Kind::Info, None, "Static facts about a GPU.");
    for (g, l) in s.gpus.iter().zip(&gpu_labels) {
        e.sample(
            &[
                ("gpu", &l.gpu),
                ("uuid", l.uuid),
                ("pci_bus_id", l.pci_bus_id),
                ("hostname", host),
                ("name", &g.name),
            ],
            1u64,
        );
    }
    let gpu_gauge = |e: &mut Encoder,
                     name: &'static str,
                     unit: Option<&'static str>,
                     help: &'static str,
                     value: &dyn Fn(&GpuRow) -> Option<Value>| {
        e.family(name, Kind::Gauge, unit, help);
        for (g, l) in s.gpus.iter().zip(&gpu_labels) {
            if let Some(v) = value(g) {
                e.sample(
                    &[
                        ("gpu", &l.gpu),
                        ("uuid", l.uuid),
                        ("pci_bus_id", l.pci_bus_id),
                        ("hostname", host),
                    ],
                    v,
                );
            }
        }
    };
    gpu_gauge(
        &mut e,
        "gpumon_gpu_up",
        None,
        "1 when the newest sample read this GPU, 0 when it failed.",
        &|g| Some(Value::Int(u64::from(g.ok))),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_memory_total_bytes",
        Some("bytes"),
        "Total GPU memory.",
        &|g| Some(g.mem.map_or(g.total, |m| m.total).into()),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_memory_used_bytes",
        Some("bytes"),
        "GPU memory in use (NVML v2: excludes the driver-reserved share).",
        &|g| g.mem.map(|m| m.used.into()),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_memory_free_bytes",
        Some("bytes"),
        "GPU memory free.",
        &|g| g.mem.map(|m| m.free.into()),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_memory_reserved_bytes",
        Some("bytes"),
        "GPU memory reserved by the driver and firmware.",
        &|g| g.mem.map(|m| m.reserved.into()),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_memory_peak_used_bytes",
        Some("bytes"),
        "Highest used memory gpumon has seen on this GPU since it started.",
        &|g| g.peak_used.map(Value::Int),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_utilization_ratio",
        Some("ratio"),
        "GPU utilization over the driver's last sample period, 0 to 1.",
        &|g| g.util_percent.map(|u| Value::Float(f64::from(u) / 100.0)),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_temperature_celsius",
        Some("celsius"),
        "GPU core temperature.",
        &|g| g.temp_c.map(|c| Value::Int(u64::from(c))),
    );
    gpu_gauge(
        &mut e,
        "gpumon_gpu_power_watts",
        Some("watts"),
        "GPU power draw.",
        &|g| g.power_mw.map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    );

    proc_gauge(
        &mut e,
        s,
        &gpu_labels,
        &s.procs,
        "gpumon_process_gpu_memory_used_bytes",
        "GPU memory a process uses on a GPU, as NVML lists it.",
        |p| p.used,
    );
    proc_gauge(
        &mut e,
        s,
        &gpu_labels,
        &s.procs,
        "gpumon_process_gpu_memory_peak_bytes",
        "Highest GPU memory gpumon has seen this process use on a GPU.",
        |p| p.peak,
    );
    allocator::render(&mut e, s, &gpu_labels);
    alerts::render(&mut e, s, &gpu_labels, alerts);
    e.finish()
}

/// Label values shared by every per-process series on one GPU.
pub(super) trait ProcKey {
    fn gpu(&self) -> u32;
    /// `None` for a GPU-wide row (an alert about no single process).
    fn pid(&self) -> Option<u32>;
    fn user(&self) -> &str;
    fn process(&self) -> &str;
    /// Rank and Kubernetes labels, only where known.
    fn placement(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

impl ProcKey for ProcRow {
    fn gpu(&self) -> u32 {
        self.gpu
    }
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }
    fn user(&self) -> &str {
        &self.user
    }
    fn process(&self) -> &str {
        &self.process
    }
    fn placement(&self) -> Vec<(&'static str, String)> {
        self.placement.labels()
    }
}

/// One family over per-process rows: `gpu`, `uuid`, `pci_bus_id`, `hostname`,
/// `pid`, `user`, `process`, the placement labels where known (`rank`, `local_rank`, `pod`,
/// `namespace`, `container`, `container_id`), plus `extra` labels; rows without a value are
/// skipped.
pub(super) fn proc_family<R: ProcKey, V: Into<Value>>(
    e: &mut Encoder,
    s: &Snapshot,
    gpu_labels: &[GpuLabels<'_>],
    rows: &[R],
    family: (&'static str, Kind, Option<&'static str>, &'static str),
    mut values: impl FnMut(&R, &mut dyn FnMut(&[(&str, &str)], V)),
) {
    let (name, kind, unit, help) = family;
    e.family(name, kind, unit, help);
    for r in rows {
        let unlisted;
        let (gpu, uuid, pci) = match s.gpus.iter().position(|g| g.index == r.gpu()) {
            Some(i) => (
                gpu_labels[i].gpu.as_str(),
                gpu_labels[i].uuid,
                gpu_labels[i].pci_bus_id,
            ),
            None => {
                unlisted = r.gpu().to_string();
                (unlisted.as_str(), "", "")
            }
        };
        let pid = r.pid().map(|p| p.to_string()).unwrap_or_default();
        let placement = r.placement();
        let mut base = vec![
            ("gpu", gpu),
            ("uuid", uuid),
            ("pci_bus_id", pci),
            ("hostname", s.hostname.as_str()),
            ("pid", pid.as_str()),
            ("user", r.user()),
            ("process", r.process()),
        ];
        base.extend(placement.iter().map(|(k, v)| (*k, v.as_str())));
        values(r, &mut |extra, v| {
            if extra.is_empty() {
                e.sample(&base, v);
            } else {
                let labels: Vec<(&str, &str)> = base.iter().chain(extra).copied().collect();
                e.sample(&labels, v);
            }
        });
    }
}

/// A byte gauge with one value per process row.
#[allow(clippy::too_many_arguments)]
pub(super) fn proc_gauge<R: ProcKey>(
    e: &mut Encoder,
    s: &Snapshot,
    gpu_labels: &[GpuLabels<'_>],
    rows: &[R],
    name: &'static str,
    help: &'static str,
    value: impl Fn(&R) -> Option<u64>,
) {
    proc_family(
        e,
        s,
        gpu_labels,
        rows,
        (name, Kind::Gauge, Some("bytes"), help),
        |r, emit| {
            if let Some(v) = value(r) {
                emit(&[], v);
            }
        },
    );
}
