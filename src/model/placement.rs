//! Where a process belongs in a fleet, for the Prometheus labels that let its series be joined
//! with the rest of a cluster's monitoring: the Kubernetes pod, namespace and container, the
//! Slurm job, and the rank of a distributed training job.
//!
//! Kubernetes: names come from the process's environment when the pod spec passes them in with
//! the downward API (`POD_NAME`, `POD_NAMESPACE`, `CONTAINER_NAME`; the `MY_`/`K8S_` spellings
//! of the Kubernetes docs too); otherwise the pod name is `HOSTNAME` (Kubernetes sets it to the
//! pod name) and the namespace is the service-account file every pod mounts. The container is
//! named only by the environment; the cgroup always gives its runtime id (`container_id`, as
//! kube-state-metrics' `kube_pod_container_info` spells it), which joins to the name there.

use serde::{Deserialize, Serialize};

/// A process's place in the fleet and in its training job: extra labels on its series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// `RANK` and `LOCAL_RANK` of a distributed job, as the companion's hello reports them.
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    /// The distributed job it is a rank of (`model::job::Job::id`).
    pub job: Option<String>,
    pub kube: Option<Kube>,
    pub slurm: Option<Slurm>,
}

impl Placement {
    /// Label pairs for what is known; nothing for a single-process job outside Kubernetes, so
    /// such series keep exactly the labels they always had.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(r) = self.rank {
            out.push(("rank", r.to_string()));
        }
        if let Some(r) = self.local_rank {
            out.push(("local_rank", r.to_string()));
        }
        if let Some(j) = &self.job {
            out.push(("job", j.clone()));
        }
        if let Some(k) = &self.kube {
            for (name, v) in [
                ("pod", &k.pod),
                ("namespace", &k.namespace),
                ("container", &k.container),
                ("container_id", &k.container_id),
            ] {
                if let Some(v) = v {
                    out.push((name, v.clone()));
                }
            }
        }
        if let Some(s) = &self.slurm {
            for (name, v) in [
                ("slurm_job_id", &s.job_id),
                ("slurm_array_job_id", &s.array_job_id),
                ("slurm_array_task_id", &s.array_task_id),
                ("slurm_nodelist", &s.nodelist),
            ] {
                if let Some(v) = v {
                    out.push((name, v.clone()));
                }
            }
        }
        out
    }
}

/// The Slurm job a process runs in, as Slurm puts it in every task's environment. Ids stay
/// text, as Slurm prints them: they are names to join on, never numbers to add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slurm {
    /// `SLURM_JOB_ID`: an array task has its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// `SLURM_ARRAY_JOB_ID` and `SLURM_ARRAY_TASK_ID`: the array and this task's index in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<String>,
    /// `SLURM_STEP_ID`: the `srun` launch within the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// `SLURM_JOB_NODELIST`, compressed as Slurm writes it (`gpu[01-04]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    /// `SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_STEP_NUM_TASKS`: the task's place in its step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_tasks: Option<u32>,
}

/// Step ids Slurm gives its own steps (batch script, extern, interactive: 0xfffffff0 and up);
/// they name no `srun` launch.
const SLURM_SPECIAL_STEP: u64 = 0xffff_fff0;

impl Slurm {
    /// Look at one `NAME=value` entry of the environment; true when it was Slurm's. The older
    /// spellings (`SLURM_JOBID`, `SLURM_NODELIST`, `SLURM_STEPID`) count where the current
    /// ones are absent.
    pub fn var(&mut self, var: &str) -> bool {
        let Some((name, value)) = var.split_once('=') else {
            return false;
        };
        if !name.starts_with("SLURM_") {
            return false;
        }
        let text = Some(value.trim().to_string()).filter(|v| !v.is_empty());
        let num = value.trim().parse::<u32>().ok();
        match name {
            "SLURM_JOB_ID" => self.job_id = text,
            "SLURM_JOBID" => self.job_id = self.job_id.take().or(text),
            "SLURM_ARRAY_JOB_ID" => self.array_job_id = text,
            "SLURM_ARRAY_TASK_ID" => self.array_task_id = text,
            "SLURM_STEP_ID" => self.step_id = text,
            "SLURM_STEPID" => self.step_id = self.step_id.take().or(text),
            "SLURM_JOB_NODELIST" => self.nodelist = text,
            "SLURM_NODELIST" => self.nodelist = self.nodelist.take().or(text),
            "SLURM_PROCID" => self.procid = num,
            "SLURM_LOCALID" => self.localid = num,
            "SLURM_STEP_NUM_TASKS" => self.step_tasks = num,
            _ => {}
        }
        true
    }

    /// What was found, or None outside a Slurm job (no job id).
    pub fn finish(self) -> Option<Slurm> {
        self.job_id.is_some().then_some(self)
    }

    /// The job as `squeue` and `sacct` name it: `12345`, an array task `12345_7`, and a
    /// step of either with its number after a dot (`12345.0`): the ranks one `srun`
    /// started, told apart from an earlier or later step of the same allocation.
    pub fn job_name(&self) -> Option<String> {
        let job = match (&self.array_job_id, &self.array_task_id) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => self.job_id.clone()?,
        };
        Some(match self.step() {
            Some(s) => format!("{job}.{s}"),
            None => job,
        })
    }

    /// The `srun` step, when the process runs in one (not the batch script's own step).
    fn step(&self) -> Option<u64> {
        self.step_id
            .as_deref()?
            .parse::<u64>()
            .ok()
            .filter(|&s| s < SLURM_SPECIAL_STEP)
    }

    /// `SLURM_PROCID` as a rank, only in a step of several tasks: the batch script and a
    /// one-task step have a PROCID of 0 too, which would name a lone process "rank 0".
    pub fn rank(&self) -> Option<u32> {
        self.procid.filter(|_| self.world_size().is_some())
    }

    pub fn local_rank(&self) -> Option<u32> {
        self.localid.filter(|_| self.world_size().is_some())
    }

    pub fn world_size(&self) -> Option<u32> {
        self.step_tasks.filter(|&n| n > 1 && self.step().is_some())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kube {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
}

/// What a process's environment and cgroup say, collected while /proc/PID/environ is read.
#[derive(Debug, Default)]
pub struct KubeEnv {
    in_kubernetes: bool,
    hostname: Option<String>,
    kube: Kube,
}

impl KubeEnv {
    /// Look at one `NAME=value` entry of the environment.
    pub fn var(&mut self, var: &str) {
        let Some((name, value)) = var.split_once('=') else {
            return;
        };
        let value = Some(value.to_string()).filter(|v| !v.is_empty());
        match name {
            "KUBERNETES_SERVICE_HOST" => self.in_kubernetes = true,
            "HOSTNAME" => self.hostname = value,
            "POD_NAME" | "MY_POD_NAME" | "K8S_POD_NAME" => self.kube.pod = value,
            "POD_NAMESPACE" | "MY_POD_NAMESPACE" | "K8S_POD_NAMESPACE" => {
                self.kube.namespace = value
            }
            "CONTAINER_NAME" | "MY_CONTAINER_NAME" | "K8S_CONTAINER_NAME" => {
                self.kube.container = value
            }
            _ => {}
        }
    }

    /// The labels, or None outside Kubernetes. `namespace_file` and `cgroup` are the process's
    /// service-account namespace file and /proc/PID/cgroup, read only when needed.
    pub fn finish(
        mut self,
        namespace_file: impl FnOnce() -> Option<String>,
        cgroup: impl FnOnce() -> Option<String>,
    ) -> Option<Kube> {
        let cg = cgroup();
        let in_pod = self.in_kubernetes || cg.as_deref().is_some_and(|c| c.contains("kubepods"));
        if !in_pod && self.kube == Kube::default() {
            return None;
        }
        if self.kube.pod.is_none() {
            self.kube.pod = self.hostname.take();
        }
        if self.kube.namespace.is_none() {
            self.kube.namespace = namespace_file()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
        }
        self.kube.container_id = cg.as_deref().and_then(container_id);
        Some(self.kube)
    }
}

/// The container's runtime id from a cgroup file, as `runtime://id` where the runtime is known:
/// systemd driver `…/cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`;
/// cgroupfs driver `/kubepods/<qos>/pod<uid>/<id>`.
pub fn container_id(cgroup: &str) -> Option<String> {
    for line in cgroup.lines() {
        if !line.contains("kubepods") {
            continue;
        }
        let last = line.rsplit('/').next().unwrap_or("");
        let last = last.strip_suffix(".scope").unwrap_or(last);
        for (prefix, runtime) in [
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
            ("docker-", "docker"),
        ] {
            if let Some(id) = last.strip_prefix(prefix) {
                return Some(format!("{runtime}://{id}"));
            }
        }
        if last.len() == 64 && last.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(last.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[&str], cgroup: Option<&str>, ns: Option<&str>) -> Option<Kube> {
        let mut k = KubeEnv::default();
        for v in vars {
            k.var(v);
        }
        k.finish(|| ns.map(str::to_string), || cgroup.map(str::to_string))
    }

    const SYSTEMD: &str = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n";

    #[test]
    fn outside_kubernetes_there_are_no_labels() {
        assert_eq!(
            env(
                &["HOSTNAME=box", "PATH=/bin"],
                Some("0::/user.slice\n"),
                None
            ),
            None
        );
    }

    #[test]
    fn downward_api_names_win() {
        let k = env(
            &[
                "KUBERNETES_SERVICE_HOST=10.0.0.1",
                "HOSTNAME=trainer-0",
                "POD_NAME=trainer-abc",
                "POD_NAMESPACE=ml",
                "CONTAINER_NAME=pytorch",
            ],
            Some(SYSTEMD),
            Some("other"),
        )
        .expect("in a pod");
        assert_eq!(k.pod.as_deref(), Some("trainer-abc"));
        assert_eq!(k.namespace.as_deref(), Some("ml"));
        assert_eq!(k.container.as_deref(), Some("pytorch"));
        assert_eq!(
            k.container_id.as_deref(),
            Some("containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        );
    }

    #[test]
    fn without_the_downward_api_hostname_and_the_service_account_file() {
        let k = env(
            &["KUBERNETES_SERVICE_HOST=10.0.0.1", "HOSTNAME=trainer-0"],
            None,
            Some("ml\n"),
        )
        .expect("in a pod");
        assert_eq!(k.pod.as_deref(), Some("trainer-0"));
        assert_eq!(k.namespace.as_deref(), Some("ml"));
        assert_eq!(k.container, None);
    }

    #[test]
    fn cgroupfs_driver_ids() {
        let id = "a".repeat(64);
        let cg = format!("12:memory:/kubepods/besteffort/pod1234/{id}\n");
        assert_eq!(container_id(&cg), Some(id));
        assert_eq!(container_id("0::/system.slice/docker-1.scope\n"), None);
        assert_eq!(
            container_id("0::/kubepods.slice/x/crio-abc.scope"),
            Some("cri-o://abc".into())
        );
    }

    fn slurm(vars: &[&str]) -> Option<Slurm> {
        let mut s = Slurm::default();
        for v in vars {
            s.var(v);
        }
        s.finish()
    }

    #[test]
    fn a_slurm_step_names_its_job_and_ranks() {
        let s = slurm(&[
            "SLURM_JOB_ID=4711",
            "SLURM_JOB_NODELIST=gpu[01-02]",
            "SLURM_STEP_ID=0",
            "SLURM_STEP_NUM_TASKS=16",
            "SLURM_PROCID=9",
            "SLURM_LOCALID=1",
            "PATH=/bin",
        ])
        .expect("in a job");
        assert_eq!(s.job_name().as_deref(), Some("4711.0"));
        assert_eq!(
            (s.rank(), s.local_rank(), s.world_size()),
            (Some(9), Some(1), Some(16))
        );
        assert_eq!(s.nodelist.as_deref(), Some("gpu[01-02]"));
    }

    #[test]
    fn an_array_task_is_its_own_job() {
        let s = slurm(&[
            "SLURM_JOB_ID=5008",
            "SLURM_ARRAY_JOB_ID=5000",
            "SLURM_ARRAY_TASK_ID=7",
        ])
        .expect("in a job");
        assert_eq!(s.job_name().as_deref(), Some("5000_7"));
        assert_eq!(s.job_id.as_deref(), Some("5008"));
    }

    #[test]
    fn the_batch_script_and_a_one_task_step_have_no_rank() {
        // The batch step: PROCID 0 and the allocation's task count, but no srun step.
        let batch = slurm(&[
            "SLURM_JOB_ID=4711",
            "SLURM_PROCID=0",
            "SLURM_STEP_NUM_TASKS=8",
            "SLURM_STEP_ID=4294967291",
        ])
        .expect("in a job");
        assert_eq!(batch.job_name().as_deref(), Some("4711"));
        assert_eq!((batch.rank(), batch.world_size()), (None, None));
        let one = slurm(&[
            "SLURM_JOB_ID=4711",
            "SLURM_STEP_ID=2",
            "SLURM_PROCID=0",
            "SLURM_STEP_NUM_TASKS=1",
        ])
        .expect("in a job");
        assert_eq!(
            (one.rank(), one.job_name().as_deref()),
            (None, Some("4711.2"))
        );
        // No job id: not in Slurm, whatever else is set.
        assert_eq!(
            slurm(&["SLURM_PROCID=3", "SLURM_CONF=/etc/slurm.conf"]),
            None
        );
        // The old spellings where the new ones are absent; the new ones win.
        let old =
            slurm(&["SLURM_JOBID=12", "SLURM_NODELIST=n1", "SLURM_JOB_ID=13"]).expect("in a job");
        assert_eq!(
            (old.job_id.as_deref(), old.nodelist.as_deref()),
            (Some("13"), Some("n1"))
        );
    }

    #[test]
    fn slurm_labels_are_only_the_known_ones() {
        let p = Placement {
            slurm: slurm(&["SLURM_JOB_ID=4711", "SLURM_JOB_NODELIST=gpu01"]),
            ..Placement::default()
        };
        assert_eq!(
            p.labels(),
            [
                ("slurm_job_id", "4711".to_string()),
                ("slurm_nodelist", "gpu01".to_string())
            ]
        );
    }
}
