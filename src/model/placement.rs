//! Where a process belongs in a fleet, for the Prometheus labels that let its series be joined
//! with the rest of a cluster's monitoring: the Kubernetes pod, namespace and container, and
//! the rank of a distributed training job.
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
        out
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
}
