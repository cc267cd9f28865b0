//! Per-process numbers beside memory, as nvtop shows them: each process's share of its
//! GPU (NVML's process utilisation samples) and its host CPU and resident memory (/proc).
//! Read at most once a second and only for the processes NVML lists (the monitor's own CPU
//! is measured against nvtop's), then carried onto the ticks between.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nvml_wrapper::error::NvmlError;

use crate::model::sample::GpuSample;

/// How often the numbers are read: CPU % is a rate over this span.
pub(crate) const STATS_EVERY: Duration = Duration::from_secs(1);

/// A process's host numbers and the CPU time they were worked out from.
#[derive(Debug, Clone, Copy)]
struct Host {
    ticks: u64,
    at: Instant,
    cpu: Option<f32>,
    rss: Option<u64>,
}

/// What the sampler thread keeps between reads.
pub(crate) struct ProcStats {
    /// /proc, or a fake tree in tests.
    root: String,
    /// Per GPU: the newest NVML sample time seen (µs), and each process's SM % in the last
    /// read; `None` when NVML could not say.
    sm: HashMap<u32, (u64, Option<HashMap<u32, u32>>)>,
    host: HashMap<u32, Host>,
    last: Option<Instant>,
    clk_tck: f64,
    page: u64,
}

impl ProcStats {
    pub(crate) fn new(root: &str) -> ProcStats {
        // SAFETY: sysconf only reads a configuration value.
        let (hz, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        ProcStats {
            root: root.to_string(),
            sm: HashMap::new(),
            host: HashMap::new(),
            last: None,
            clk_tck: if hz > 0 { hz as f64 } else { 100.0 },
            page: if page > 0 { page as u64 } else { 4096 },
        }
    }

    /// Refresh when due (`sm` gives a GPU's utilisation samples since a time), then write
    /// the numbers into `gpus`' process samples.
    pub(crate) fn apply(
        &mut self,
        now: Instant,
        sm: impl Fn(u32, u64) -> Result<Vec<(u32, u64, u32)>, NvmlError>,
        gpus: &mut [GpuSample],
    ) {
        let due = self
            .last
            .is_none_or(|l| now.duration_since(l) + Duration::from_millis(100) >= STATS_EVERY);
        if due {
            self.last = Some(now);
            for g in gpus.iter().filter(|g| g.error.is_none()) {
                let since = self.sm.get(&g.index).map_or(0, |s| s.0);
                let read = match sm(g.index, since) {
                    Ok(samples) => Some(latest(&samples)),
                    // No process used the GPU since then.
                    Err(NvmlError::NotFound) => Some((since, HashMap::new())),
                    Err(_) => None,
                };
                let entry = match read {
                    Some((ts, per_pid)) => (ts.max(since), Some(per_pid)),
                    None => (since, None),
                };
                self.sm.insert(g.index, entry);
            }
            let mut pids: Vec<u32> = gpus
                .iter()
                .flat_map(|g| g.procs.iter().map(|p| p.pid))
                .collect();
            pids.sort_unstable();
            pids.dedup();
            self.read_host(&pids, now);
        }
        for g in gpus.iter_mut() {
            let sm = self.sm.get(&g.index).and_then(|s| s.1.as_ref());
            for p in &mut g.procs {
                // A listed process NVML sampled no utilisation for used none.
                p.sm_util = sm.map(|m| m.get(&p.pid).copied().unwrap_or(0));
                let h = self.host.get(&p.pid);
                p.cpu = h.and_then(|h| h.cpu);
                p.rss = h.and_then(|h| h.rss);
            }
        }
    }

    /// CPU time and resident pages of each pid; a pid no longer listed is forgotten.
    fn read_host(&mut self, pids: &[u32], now: Instant) {
        self.host.retain(|pid, _| pids.binary_search(pid).is_ok());
        for &pid in pids {
            let Some(ticks) = cpu_ticks(&self.root, pid) else {
                self.host.remove(&pid);
                continue;
            };
            let rss = std::fs::read_to_string(format!("{}/{pid}/statm", self.root))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
                .map(|pages| pages * self.page);
            let cpu = self.host.get(&pid).and_then(|h| {
                cpu_percent(
                    ticks.checked_sub(h.ticks)?,
                    self.clk_tck,
                    now.duration_since(h.at),
                )
            });
            self.host.insert(
                pid,
                Host {
                    ticks,
                    at: now,
                    cpu,
                    rss,
                },
            );
        }
    }
}

/// utime + stime of `pid` (fields 14 and 15 of /proc/PID/stat), in clock ticks.
fn cpu_ticks(root: &str, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("{root}/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields start after the last ')'.
    let mut f = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    Some(f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?)
}

/// CPU % of one core: `ticks` of CPU time over `span` of wall time.
fn cpu_percent(ticks: u64, clk_tck: f64, span: Duration) -> Option<f32> {
    let secs = span.as_secs_f64();
    (secs >= 0.05).then(|| (ticks as f64 / clk_tck / secs * 100.0) as f32)
}

/// Each pid's SM % in its newest sample, and the newest sample time, from NVML's
/// `(pid, timestamp µs, sm %)` samples.
fn latest(samples: &[(u32, u64, u32)]) -> (u64, HashMap<u32, u32>) {
    let mut newest: HashMap<u32, (u64, u32)> = HashMap::new();
    let mut max_ts = 0;
    for &(pid, ts, sm) in samples {
        max_ts = max_ts.max(ts);
        let e = newest.entry(pid).or_insert((ts, sm));
        if ts >= e.0 {
            *e = (ts, sm);
        }
    }
    (
        max_ts,
        newest.into_iter().map(|(p, (_, sm))| (p, sm)).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::{ProcKind, ProcSample};

    fn gpu(index: u32, pids: &[u32]) -> GpuSample {
        GpuSample {
            index,
            mem: None,
            util: None,
            temp_c: None,
            power_mw: None,
            procs: pids
                .iter()
                .map(|&pid| ProcSample {
                    pid,
                    kind: ProcKind::Compute,
                    used: Some(1),
                    ..ProcSample::default()
                })
                .collect(),
            error: None,
        }
    }

    /// A fake /proc entry: `utime` + `stime` ticks and `rss_pages` resident.
    fn fake(root: &std::path::Path, pid: u32, cpu: (u64, u64), rss_pages: u64) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).expect("dir");
        // A name with a space and a parenthesis: fields are counted after the last ')'.
        let stat = format!(
            "{pid} (py thon)) S 1 1 1 0 -1 4194304 100 0 0 0 {} {} 0 0 20 0 4 0 5000 1000 10",
            cpu.0, cpu.1
        );
        std::fs::write(dir.join("stat"), stat).expect("stat");
        std::fs::write(dir.join("statm"), format!("9000 {rss_pages} 300 1 0 500 0"))
            .expect("statm");
    }

    #[test]
    fn cpu_is_a_rate_between_reads_and_rss_is_resident_pages() {
        let tmp = tempfile::tempdir().expect("tmp");
        fake(tmp.path(), 7, (100, 50), 256);
        let mut s = ProcStats::new(&tmp.path().display().to_string());
        let t0 = Instant::now();
        let no_sm = |_, _| Err(NvmlError::NotSupported);
        let mut g = vec![gpu(0, &[7])];
        s.apply(t0, no_sm, &mut g);
        let p = &g[0].procs[0];
        assert_eq!((p.cpu, p.rss, p.sm_util), (None, Some(256 * s.page), None));
        // Half a core over two seconds: one core's ticks in one of them.
        let tck = s.clk_tck as u64;
        fake(tmp.path(), 7, (100 + tck / 2, 50 + tck / 2), 512);
        s.apply(t0 + Duration::from_millis(500), no_sm, &mut g);
        assert_eq!(g[0].procs[0].rss, Some(256 * s.page), "not due: carried");
        s.apply(t0 + Duration::from_secs(2), no_sm, &mut g);
        let p = &g[0].procs[0];
        assert_eq!(p.rss, Some(512 * s.page));
        assert!((p.cpu.expect("a rate") - 50.0).abs() < 1.0, "{:?}", p.cpu);
    }

    #[test]
    fn sm_is_the_newest_sample_and_zero_for_a_listed_process_without_one() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut s = ProcStats::new(&tmp.path().display().to_string());
        let asked = std::cell::Cell::new(None);
        let sm = |gpu: u32, since: u64| {
            asked.set(Some((gpu, since)));
            Ok(vec![(7, 1_000, 40), (7, 2_000, 65), (9, 1_500, 5)])
        };
        let mut g = vec![gpu(0, &[7, 8])];
        let t0 = Instant::now();
        s.apply(t0, sm, &mut g);
        let got: Vec<Option<u32>> = g[0].procs.iter().map(|p| p.sm_util).collect();
        assert_eq!(got, vec![Some(65), Some(0)]);
        assert_eq!(
            asked.get(),
            Some((0, 0)),
            "everything the driver buffered, first"
        );
        s.apply(t0 + STATS_EVERY, |_, _| Err(NvmlError::NotFound), &mut g);
        let got: Vec<Option<u32>> = g[0].procs.iter().map(|p| p.sm_util).collect();
        assert_eq!(got, vec![Some(0), Some(0)], "no sample since: idle");
        s.apply(t0 + 2 * STATS_EVERY, sm, &mut g);
        assert_eq!(
            asked.get(),
            Some((0, 2_000)),
            "samples since the newest seen"
        );
    }

    #[test]
    fn a_cpu_rate_needs_a_span() {
        assert_eq!(cpu_percent(100, 100.0, Duration::from_millis(10)), None);
        assert_eq!(cpu_percent(200, 100.0, Duration::from_secs(1)), Some(200.0));
    }
}
