//! Metric names, types, units and labels (docs/metrics.md is the reference),
//! rendered from a `Snapshot` in either exposition format.

use super::alerts::{self, AlertRow};
use super::allocator;
use super::encode::{Encoder, Format, Kind, Value};
use super::labels::{GpuLabels, proc_gauge};
use super::snapshot::{GpuRow, Snapshot};

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
