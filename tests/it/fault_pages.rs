//! A running gpumon has its own code in one-page mappings (src/runner/fault_pages.rs): a
//! page of it that runs is brought in alone, not with the 64 KiB block around it. Without
//! that the kernel's fault-around made most of the 4 MB of code resident in a watch
//! (docs/performance.md). How a split mapping faults is tested in the unit tests there; this
//! checks that the binary does split itself, before it starts serving.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_running_gpumon_has_its_code_in_one_page_mappings() {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_gpumon")).expect("gpumon");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.gpumon.jsonl.gz");
    let mut child = Command::new(&exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--replay"])
        .arg(&demo)
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpumon serve");
    let stderr = child.stderr.take().expect("stderr");
    let child = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("a line");
    assert!(
        line.contains("serving metrics"),
        "unexpected first line: {line}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.0.id())).expect("maps");
    // Code mappings of the executable, and the pages they span.
    let code: Vec<u64> = maps
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("r-xp"))
        .filter(|l| l.split_whitespace().nth(5).map(Path::new) == Some(exe.as_path()))
        .map(|l| {
            let range = l.split_whitespace().next().expect("range");
            let (lo, hi) = range.split_once('-').expect("lo-hi");
            let page = |x| u64::from_str_radix(x, 16).expect("hex") / 4096;
            page(hi) - page(lo)
        })
        .collect();
    let pages: u64 = code.iter().sum();
    assert!(pages > 256, "{pages} pages of code found: {maps}");
    assert_eq!(
        code.iter().max(),
        Some(&1),
        "every code mapping is one page ({} mappings over {pages} pages)",
        code.len()
    );
}
