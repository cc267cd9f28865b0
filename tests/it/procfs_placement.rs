//! /proc/PID/environ and /proc/PID/cgroup give a process's rank and Kubernetes placement.

use gpumon::source::procfs::read_at;

#[test]
fn rank_and_pod_come_from_the_processes_own_files() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("4242");
    std::fs::create_dir_all(dir.join("root/var/run/secrets/kubernetes.io/serviceaccount"))
        .expect("mkdir");
    let env = [
        "PATH=/usr/bin",
        "RANK=5",
        "LOCAL_RANK=1",
        "WORLD_SIZE=16",
        "KUBERNETES_SERVICE_HOST=10.96.0.1",
        "HOSTNAME=trainer-worker-2",
        "CUDA_VISIBLE_DEVICES=1",
    ]
    .join("\0");
    std::fs::write(dir.join("environ"), env).expect("environ");
    std::fs::write(
        dir.join("cgroup"),
        "0::/kubepods.slice/kubepods-pod9.slice/cri-containerd-abc123.scope\n",
    )
    .expect("cgroup");
    std::fs::write(
        dir.join("root/var/run/secrets/kubernetes.io/serviceaccount/namespace"),
        "ml-team",
    )
    .expect("namespace");
    let info = read_at(&root.path().display().to_string(), 4242);
    assert_eq!(
        (info.rank, info.local_rank, info.world_size),
        (Some(5), Some(1), Some(16))
    );
    assert_eq!(info.cuda_visible_devices.as_deref(), Some("1"));
    let k = info.kube.expect("in a pod");
    assert_eq!(k.pod.as_deref(), Some("trainer-worker-2"));
    assert_eq!(k.namespace.as_deref(), Some("ml-team"));
    assert_eq!(k.container_id.as_deref(), Some("containerd://abc123"));

    std::fs::write(dir.join("environ"), "PATH=/usr/bin\0HOSTNAME=laptop").expect("environ");
    std::fs::write(dir.join("cgroup"), "0::/user.slice/session-1.scope\n").expect("cgroup");
    let info = read_at(&root.path().display().to_string(), 4242);
    assert_eq!((info.rank, info.kube), (None, None));
}
