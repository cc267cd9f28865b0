//! Recording lines written by hand, for the tests that feed `replay --follow` a file that
//! is still being written (follow_hostile, replay_follow): one 1 GB GPU, times of now.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The header line of a recording started at `t0`, one GPU of 1 GB, 100 ms interval.
pub fn header(t0: i64) -> String {
    format!(
        "{{\"type\":\"header\",\"v\":1,\"format\":\"gpumon\",\"host\":\"h\",\"started\":{t0},\"interval_ms\":100,\"gpus\":[{{\"index\":0,\"name\":\"G\",\"uuid\":\"GPU-1\",\"pci_bus_id\":\"0\",\"memory_total\":1000000000}}]}}\n"
    )
}

/// A tick line at `t` with `used` bytes on that GPU and no processes.
pub fn tick(t: i64, used: u64) -> String {
    format!(
        "{{\"type\":\"tick\",\"t\":{t},\"gpus\":[{{\"index\":0,\"mem\":{{\"total\":1000000000,\"used\":{used},\"free\":1,\"reserved\":0}},\"procs\":[]}}]}}\n"
    )
}
