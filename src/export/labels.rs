//! The labels every per-process series carries, shared by the metric families of
//! `metrics`, `allocator` and `alerts`.

use super::encode::{Encoder, Kind, Value};
use super::snapshot::{AllocRow, ProcRow, Snapshot};

/// Per-GPU label values, formatted once per scrape.
pub(super) struct GpuLabels<'a> {
    pub(super) gpu: String,
    pub(super) uuid: &'a str,
    pub(super) pci_bus_id: &'a str,
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

/// Rows that name one process on one GPU carry the same fields: one impl for each.
macro_rules! proc_rows {
    ($($row:ty),+) => {$(
        impl ProcKey for $row {
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
    )+};
}

proc_rows!(ProcRow, AllocRow);

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
