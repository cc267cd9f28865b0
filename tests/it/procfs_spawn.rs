//! A real `multiprocessing` child read from /proc as gpumon reads every GPU process: its own
//! command line is the bootstrap, and what gpumon names it by is its launcher's script with
//! its arguments (spawn: the parent; forkserver: the forkserver's parent), with the rank and
//! the rendezvous its environment holds.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use gpumon::model::job::{Identity, JobKey};

const PARENT: &str = r#"
import multiprocessing as mp, os, sys

def child(q, stop):
    q.put(os.getpid())
    stop.wait(60)

if __name__ == "__main__":
    os.environ.update(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29577")
    ctx = mp.get_context(sys.argv[1])
    q, stop = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=child, args=(q, stop))
    p.start()
    print(q.get(timeout=60), flush=True)
    sys.stdin.read()
    stop.set()
    p.join(10)
"#;

fn has_python() -> bool {
    Command::new("python3")
        .args(["-c", "import sys; assert sys.version_info >= (3, 9)"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn spawn_and_forkserver_children_are_named_by_their_launchers_script() {
    if !has_python() {
        assert!(std::env::var_os("CI").is_none(), "CI needs python3");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = tmp.path().join("ddp_train.py");
    std::fs::write(&script, PARENT).expect("write");
    for method in ["spawn", "forkserver"] {
        let mut parent = Command::new("python3")
            .arg(&script)
            .arg(method)
            .arg("--epochs")
            .arg("40")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(parent.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("child pid");
        let pid: u32 = line.trim().parse().expect("a pid");
        let info = gpumon::source::procfs::read(pid);
        drop(parent.stdin.take());
        let _ = parent.wait();
        let own = info.cmdline.clone().unwrap_or_default();
        assert!(own.contains("from multiprocessing."), "{method}: {own}");
        let program = info.program.clone().unwrap_or_default();
        assert!(
            program.ends_with(&format!("ddp_train.py {method} --epochs 40")),
            "{method}: {program}"
        );
        let who = Identity::of(&info, None);
        assert_eq!(
            who.ranked_label().as_deref(),
            Some("[rank 1] ddp_train.py"),
            "{method}"
        );
        assert_eq!(
            who.key,
            Some(JobKey::Master("127.0.0.1:29577".into())),
            "{method}"
        );
    }
}
