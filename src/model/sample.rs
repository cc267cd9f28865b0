//! Raw samples as sources produce them and recordings store them.
//! Optional fields are `None` when the driver could not answer: shown as "n/a", never as 0.

use serde::{Deserialize, Serialize};

use super::time::Ts;

/// Static facts about one physical GPU, read once at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// NVML index (PCI bus order).
    pub index: u32,
    pub name: String,
    /// `GPU-xxxxxxxx-...` as NVML and `CUDA_VISIBLE_DEVICES` spell it.
    pub uuid: String,
    pub pci_bus_id: String,
    pub memory_total: u64,
    /// MIG device UUIDs on this card (empty when MIG is off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_uuids: Vec<String>,
}

/// Memory as the v2 NVML call reports it: `reserved` is the driver/firmware share,
/// not counted in `used` (nvidia-smi agrees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    pub total: u64,
    pub used: u64,
    pub free: u64,
    #[serde(default)]
    pub reserved: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ProcKind {
    #[default]
    Compute,
    Graphics,
    Both,
}

/// One process on one GPU as NVML lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ProcSample {
    pub pid: u32,
    #[serde(default)]
    pub kind: ProcKind,
    /// `None` when NVML does not report it (e.g. some containers, WDDM).
    pub used: Option<u64>,
    /// Its share of the GPU's streaming multiprocessors, in percent, over the last second
    /// (NVML's process utilisation samples); `None` when NVML gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util: Option<u32>,
    /// Host CPU it used over the last second, in percent of one core (/proc/PID/stat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f32>,
    /// Host memory resident, in bytes (/proc/PID/statm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss: Option<u64>,
}

/// One tick of one GPU. `error` set means the device could not be read this tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<MemInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_mw: Option<u32>,
    #[serde(default)]
    pub procs: Vec<ProcSample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One sampler tick: every GPU at (nearly) one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    pub t: Ts,
    pub gpus: Vec<GpuSample>,
}

/// What /proc tells about a GPU process. Every field may be unknown
/// (another user's process, or one that already exited).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProcInfo {
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// Whether /proc/PID/environ could be read; without it the logical index is unknown.
    #[serde(default)]
    pub env_readable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_device_order: Option<String>,
    /// `RANK`, `LOCAL_RANK`, `WORLD_SIZE` of a distributed job (torchrun, DeepSpeed, Lightning
    /// set them in every rank's environment), so ranks are known without a companion too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// `MASTER_ADDR:MASTER_PORT` and `TORCHELASTIC_RUN_ID`: the rendezvous every rank of one
    /// job shares, so its ranks are told apart from another job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Parent and process group: the launcher ranks share when nothing else names the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgid: Option<u32>,
    /// A `multiprocessing` spawn or forkserver child's own command line is the bootstrap
    /// (`python -c "from multiprocessing.spawn import spawn_main; ..."`): this is the command
    /// line of the nearest ancestor that is not one, the program the child runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Kubernetes pod, namespace and container when the process runs in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube: Option<crate::model::placement::Kube>,
    /// The Slurm job, array task and step when the process runs in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<crate::model::placement::Slurm>,
    /// When it started (Unix ms, from its start time in /proc and the boot time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Ts>,
}
