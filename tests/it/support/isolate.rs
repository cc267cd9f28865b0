//! One test alone in a fresh process of this test binary, for the few tests that measure
//! what the whole process holds: its own resident memory, or the peak RSS of the children it
//! has waited for. In the shared binary the other tests' threads, allocations and children
//! would count too (a file of its own used to give each test file a process of its own).

use std::process::Command;

/// Set, in the fresh process, to the name of the one test it runs.
const ALONE: &str = "GPUMON_IT_ALONE";

/// Call first in such a test as `if !alone(module_path!(), "NAME") { return; }`. In the
/// fresh process it returns true and the body runs. Anywhere else it runs `MODULE::NAME`
/// there (`--exact`, one thread), fails unless that one test ran and passed, and returns
/// false: the body has run, where nothing else could disturb it.
pub fn alone(module_path: &str, name: &str) -> bool {
    // module_path!() starts with the crate, `it`; libtest names tests without it.
    let module = module_path.split_once("::").map_or(module_path, |(_, m)| m);
    let test = format!("{module}::{name}");
    if std::env::var_os(ALONE).is_some_and(|v| v == test.as_str()) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([test.as_str(), "--exact", "--test-threads=1"])
        .env(ALONE, &test)
        .output()
        .expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 1 passed;"),
        "{test}, alone in a fresh process, did not pass:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}
