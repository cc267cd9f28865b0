//! No output file can be turned against the user who writes it: the
//! report, recordings, CSV, JSONL, alert logs and man pages never write through a link
//! another user planted (at the temp name or at the name itself), never rename over a
//! device or FIFO (those are written in place); and the report fails loudly: a
//! full disk or `ulimit -f` is exit 1 and one line, with no temp file left.
//!
//! The attacks (a planted link, a full disk) are run as they were found: the
//! attacker is `nobody` (through `setpriv`) when the tests run as root, the victim a root
//! file of mode 0600. Where that is not possible the test says why and does the part it can.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo-leaks.gpumon.jsonl.gz")
}

fn gpumon() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpumon"));
    c.env("XDG_CONFIG_HOME", "/nonexistent");
    c
}

/// Why the cross-user attack cannot run here, if it cannot.
fn no_second_user() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: no other user's links to plant".into());
    }
    let ok = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "setpriv cannot run a command as nobody (65534)".into())
}

/// `ln -s target link` for each pair, as nobody.
fn plant_as_nobody(links: &[(PathBuf, PathBuf)]) {
    let mut args = vec![
        "--reuid=65534".to_string(),
        "--regid=65534".into(),
        "--clear-groups".into(),
        "sh".into(),
        "-c".into(),
        "while [ $# -gt 0 ]; do ln -s \"$1\" \"$2\" || exit 1; shift 2; done".into(),
        "sh".into(),
    ];
    for (target, link) in links {
        args.push(target.display().to_string());
        args.push(link.display().to_string());
    }
    let st = Command::new("setpriv")
        .args(&args)
        .status()
        .expect("setpriv");
    assert!(st.success(), "planting as nobody failed");
}

/// A shared directory (mode 1777, as /tmp or a team's results directory) and a root-only
/// victim file outside it.
fn shared_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let top = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let shared = top.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let victim = top.path().join("victim");
    std::fs::write(&victim, "ROOT SECRET CONFIG\n").expect("write");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    (top, shared, victim)
}

fn assert_victim_untouched(victim: &Path) {
    assert_eq!(
        std::fs::read_to_string(victim).expect("read victim"),
        "ROOT SECRET CONFIG\n",
        "the victim was written through a planted link"
    );
}

/// R1a: links planted by nobody at the temp name the report used to write (`.r.html.PID.tmp`,
/// PID known because gpumon is exec'd by a shell that waits first) and at the name itself.
#[test]
fn a_root_report_never_writes_through_links_nobody_planted() {
    if let Some(why) = no_second_user() {
        eprintln!("skipped: {why}");
        return;
    }
    let (_top, shared, victim) = shared_dir();
    let out = shared.join("r.html");
    let child = gpumon()
        .arg("report")
        .arg(demo())
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn_after_sleep();
    let pid = child.id();
    plant_as_nobody(&[
        (victim.clone(), shared.join(format!(".r.html.{pid}.tmp"))),
        (victim.clone(), out.clone()),
    ]);
    let o = child.wait();
    assert_eq!(o.0, Some(0), "{}", o.1);
    assert_victim_untouched(&victim);
    let m = std::fs::symlink_metadata(&out).expect("stat");
    assert!(m.is_file(), "the planted link at the name is replaced");
    assert_eq!(m.uid(), 0);
    assert!(
        std::fs::read_to_string(&out)
            .expect("read")
            .starts_with("<!DOCTYPE html>")
    );
}

/// The CSV, JSONL and alert outputs and a recording, each at a name where nobody planted a
/// link to the victim.
#[test]
fn streams_and_recordings_replace_a_planted_link_instead_of_following_it() {
    if let Some(why) = no_second_user() {
        eprintln!("skipped: {why}");
        return;
    }
    let (_top, shared, victim) = shared_dir();
    let names = ["rows.csv", "rows.jsonl", "alerts.jsonl", "rec.gpumon.jsonl"];
    let links: Vec<_> = names
        .iter()
        .map(|n| (victim.clone(), shared.join(n)))
        .collect();
    plant_as_nobody(&links);
    let o = gpumon()
        .args(["replay", "--headless", "--csv"])
        .arg(shared.join("rows.csv"))
        .arg("--jsonl")
        .arg(shared.join("rows.jsonl"))
        .arg("--alerts-jsonl")
        .arg(shared.join("alerts.jsonl"))
        .arg(demo())
        .output()
        .expect("replay");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = gpumon::record::Reader::open(&demo())
        .expect("demo")
        .header
        .clone();
    let rec = gpumon::record::Recorder::create(
        &shared.join("rec.gpumon.jsonl"),
        &header,
        gpumon::record::Format::Ndjson,
    )
    .expect("recorder");
    assert_eq!(rec.finish(), None);
    assert_victim_untouched(&victim);
    for n in names {
        let m = std::fs::symlink_metadata(shared.join(n)).expect("stat");
        assert!(m.is_file() && m.len() > 0 && m.uid() == 0, "{n}");
    }
}

/// Without a second user: links planted by this user at the name are replaced too, and man
/// pages written into a directory do the same.
#[test]
fn man_pages_replace_a_link_at_their_name() {
    let d = tempfile::tempdir().expect("dir");
    let victim = d.path().join("victim");
    std::fs::write(&victim, "ROOT SECRET CONFIG\n").expect("write");
    let pages = d.path().join("man");
    std::fs::create_dir(&pages).expect("mkdir");
    std::os::unix::fs::symlink(&victim, pages.join("gpumon.1")).expect("link");
    let o = gpumon()
        .args(["man", "--dir"])
        .arg(&pages)
        .output()
        .expect("man");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_victim_untouched(&victim);
    assert!(
        std::fs::symlink_metadata(pages.join("gpumon.1"))
            .expect("stat")
            .is_file()
    );
}

/// R1b: `-o /dev/null`, `-o /dev/full` and a FIFO are written in place, never replaced. The
/// devices are private copies (`mknod`, as root): a regression must not replace the
/// machine's own `/dev/null`.
#[test]
fn devices_and_fifos_are_written_in_place() {
    let nodes = tempfile::tempdir().expect("dir");
    let null = nodes.path().join("null");
    let full = nodes.path().join("full");
    let made = [(&null, "3"), (&full, "7")].iter().all(|(p, minor)| {
        Command::new("mknod")
            .args(["-m", "666"])
            .arg(p)
            .args(["c", "1", minor])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if made {
        let o = gpumon()
            .arg("report")
            .arg(demo())
            .arg("-o")
            .arg(&null)
            .output()
            .expect("report");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = std::fs::metadata(&null).expect("stat").file_type();
        assert!(t.is_char_device(), "the null device replaced by a file");
        let o = gpumon()
            .arg("report")
            .arg(demo())
            .arg("-o")
            .arg(&full)
            .output()
            .expect("report");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        let t = std::fs::metadata(&full).expect("stat").file_type();
        assert!(t.is_char_device(), "the full device replaced by a file");
    } else {
        eprintln!("devices skipped: mknod needs root (the FIFO is still checked)");
    }
    let d = tempfile::tempdir().expect("dir");
    let fifo = d.path().join("pipe");
    let st = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(st.success());
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read(fifo).expect("read fifo")
    });
    let o = gpumon()
        .arg("report")
        .arg(demo())
        .args(["--format", "md", "-o"])
        .arg(&fifo)
        .output()
        .expect("report");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = reader.join().expect("reader");
    assert!(
        got.starts_with(b"# gpumon report"),
        "the page came through the FIFO"
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .expect("stat")
            .file_type()
            .is_fifo()
    );
    assert_eq!(
        std::fs::read_dir(d.path()).expect("ls").count(),
        1,
        "no temp file"
    );
}

/// The report under `ulimit -f` and into a full stdout: exit 1, one line, no temp file.
#[test]
fn the_report_fails_loudly_on_a_full_disk_or_a_file_size_limit() {
    let d = tempfile::tempdir().expect("dir");
    let out = d.path().join("r2.html");
    let mut cmd = gpumon();
    cmd.arg("report").arg(demo()).arg("-o").arg(&out);
    // SAFETY: signal and setrlimit are async-signal-safe; nothing else runs in the child yet.
    unsafe {
        cmd.pre_exec(|| {
            // As a shell starts it: an ignored SIGXFSZ is inherited, and this test process
            // ignores it once any test here has made a Recorder.
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            let r = libc::rlimit {
                rlim_cur: 20 * 1024,
                rlim_max: 20 * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().expect("report");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "killed by SIGXFSZ? {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert_eq!(
        std::fs::read_dir(d.path()).expect("ls").count(),
        0,
        "temp file left"
    );

    for args in [&["-o", "-"][..], &["--format", "md"][..]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let o = gpumon()
            .arg("report")
            .arg(demo())
            .args(args)
            .stdout(full)
            .output()
            .expect("report");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("No space left on device"), "{err}");
    }
}

/// A child started by `sh -c 'sleep 1; exec "$0" "$@"'`: its pid is gpumon's pid, known a
/// second before gpumon runs.
trait SpawnAfterSleep {
    fn spawn_after_sleep(&mut self) -> Child;
}

struct Child(Option<std::process::Child>);

impl Child {
    fn id(&self) -> u32 {
        self.0.as_ref().expect("child").id()
    }
    fn wait(mut self) -> (Option<i32>, String) {
        let o = self
            .0
            .take()
            .expect("child")
            .wait_with_output()
            .expect("wait");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

impl SpawnAfterSleep for Command {
    fn spawn_after_sleep(&mut self) -> Child {
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg("sleep 1; exec \"$0\" \"$@\"")
            .arg(self.get_program())
            .args(self.get_args())
            .envs(self.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stderr(Stdio::piped());
        Child(Some(sh.spawn().expect("sh")))
    }
}

/// Every other writer of stdout: a full disk is exit 1 and one line naming stdout.
#[test]
fn every_stdout_writer_fails_loudly_on_a_full_disk() {
    for args in [
        &["completions", "bash"][..],
        &["man"][..],
        &["demo", "list"][..],
        &["config", "--print-default"][..],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let o = gpumon().args(args).stdout(full).output().expect("gpumon");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("gpumon: cannot write to stdout: No space left on device"),
            "{args:?}: {err}"
        );
    }
}
