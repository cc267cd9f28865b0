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

/// A task `srun` started: its Slurm job, array task, step and node list, read from its own
/// environment as Slurm sets it (names and values as in `srun env` on a two-node array job).
#[test]
fn the_slurm_job_comes_from_the_processes_environment() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("5151");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let env = [
        "PATH=/usr/bin",
        "SLURM_JOB_ID=81235",
        "SLURM_JOBID=81235",
        "SLURM_ARRAY_JOB_ID=81230",
        "SLURM_ARRAY_TASK_ID=5",
        "SLURM_STEP_ID=0",
        "SLURM_STEPID=0",
        "SLURM_JOB_NODELIST=gpu[07-08]",
        "SLURM_NODELIST=gpu[07-08]",
        "SLURM_PROCID=3",
        "SLURM_LOCALID=1",
        "SLURM_NODEID=1",
        "SLURM_STEP_NUM_TASKS=4",
        "SLURM_NTASKS=4",
        "SLURMD_NODENAME=gpu08",
        "HOSTNAME=gpu08",
    ]
    .join("\0");
    std::fs::write(dir.join("environ"), env).expect("environ");
    std::fs::write(dir.join("cmdline"), "python3\0train.py\0").expect("cmdline");
    let info = read_at(&root.path().display().to_string(), 5151);
    let s = info.slurm.clone().expect("in a Slurm job");
    assert_eq!(s.job_id.as_deref(), Some("81235"));
    assert_eq!(
        (s.array_job_id.as_deref(), s.array_task_id.as_deref()),
        (Some("81230"), Some("5"))
    );
    assert_eq!(s.nodelist.as_deref(), Some("gpu[07-08]"));
    assert_eq!(s.job_name().as_deref(), Some("81230_5.0"));
    // No RANK in the environment: Slurm's task id is the rank, and not a Kubernetes pod.
    assert_eq!(info.rank, None, "ProcInfo keeps what the launcher set");
    let who = gpumon::model::job::Identity::of(&info, None);
    assert_eq!(
        (who.rank, who.local_rank, who.world_size),
        (Some(3), Some(1), Some(4))
    );
    assert_eq!(info.kube, None);
    // The recording keeps it, and a recording written before it existed still reads.
    let json = serde_json::to_string(&info).expect("serialise");
    assert!(json.contains("\"slurm\":{\"job_id\":\"81235\""), "{json}");
    let back: gpumon::model::sample::ProcInfo = serde_json::from_str(&json).expect("read back");
    assert_eq!(back, info);
    let old: gpumon::model::sample::ProcInfo =
        serde_json::from_str(r#"{"pid":5151,"name":"python3","env_readable":true}"#)
            .expect("an old recording's process");
    assert_eq!(old.slurm, None);
}
