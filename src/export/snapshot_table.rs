//! `gpumon snapshot` for a person: one line per GPU, then one per process, in columns
//! (as `nvidia-smi`'s summary, with gpumon's units). `--json` is the script form
//! (`json.rs`); this one may change its layout, that one keeps its keys.

use crate::fmt::human;
use crate::model::state::State;
use crate::model::time::rfc3339;

/// The whole table, ending with a newline. ASCII only: it may go to a log or a pager
/// whatever the locale.
pub fn table(state: &State) -> String {
    let mut out = String::new();
    let h = state.header.as_ref();
    let mut head = vec![format!("host {}", h.map_or("?", |h| h.host.as_str()))];
    if let Some(d) = h.and_then(|h| h.driver_version.as_deref()) {
        head.push(format!("driver {d}"));
    }
    if let Some(c) = h.and_then(|h| h.cuda_version.as_deref()) {
        head.push(format!("CUDA {c}"));
    }
    head.push(rfc3339(state.now));
    out.push_str(&head.join("  "));
    out.push('\n');

    let mut gpus = vec![row([
        "GPU", "NAME", "USED", "TOTAL", "UTIL", "TEMP", "POWER",
    ])];
    for g in &state.gpus {
        let s = g.last.as_ref();
        let mem = s.and_then(|s| s.mem);
        let dash = || "-".to_string();
        if let Some(e) = g.error() {
            // Ends the row, outside the columns: a long reason must not widen them.
            let why = crate::fmt::inert(&format!("error: {e}"));
            gpus.push(vec![g.info.index.to_string(), g.info.name.clone(), why]);
            continue;
        }
        gpus.push(vec![
            g.info.index.to_string(),
            g.info.name.clone(),
            mem.map_or_else(dash, |m| human(m.used)),
            human(mem.map_or(g.info.memory_total, |m| m.total)),
            s.and_then(|s| s.util)
                .map_or_else(dash, |u| format!("{u}%")),
            s.and_then(|s| s.temp_c)
                .map_or_else(dash, |t| format!("{t} C")),
            s.and_then(|s| s.power_mw)
                .map_or_else(dash, |p| format!("{:.0} W", f64::from(p) / 1000.0)),
        ]);
    }
    columns(
        &mut out,
        &gpus,
        &[false, false, true, true, true, true, true],
    );

    let mut procs = vec![row(["GPU", "PID", "USER", "USED", "PROCESS"])];
    for g in &state.gpus {
        for (p, pg) in state.procs_on(g.info.index) {
            let label = p.who.ranked_label();
            procs.push(vec![
                g.info.index.to_string(),
                p.info.pid.to_string(),
                p.info.user.clone().unwrap_or_else(|| "?".into()),
                pg.last_used.map_or_else(|| "-".into(), human),
                crate::fmt::inert(&label.unwrap_or_else(|| "?".into())),
            ]);
        }
    }
    out.push('\n');
    if procs.len() == 1 {
        out.push_str("no GPU processes\n");
    } else {
        columns(&mut out, &procs, &[false, true, false, true, false]);
    }
    out
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Rows in columns two spaces apart; `right[i]` right-aligns column i (numbers). The last
/// cell of a row is not padded (no trailing blanks), and a short row's last cell (an
/// error) takes no part in the widths.
fn columns(out: &mut String, rows: &[Vec<String>], right: &[bool]) {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter(|r| r.len() == n || i + 1 < r.len())
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i].saturating_sub(c.chars().count());
            let last = i + 1 == r.len();
            if right.get(i).copied().unwrap_or(false) && !(last && r.len() < n) {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                if !last {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::frame::{FORMAT_VERSION, Frame, Header};
    use crate::model::sample::{GpuInfo, GpuSample, MemInfo, ProcInfo, ProcSample, Tick};

    fn state() -> State {
        let gpu = |index: u32| GpuInfo {
            index,
            name: "NVIDIA H200".into(),
            uuid: format!("GPU-{index}"),
            pci_bus_id: String::new(),
            memory_total: 150_754_820_096,
            mig_uuids: vec![],
        };
        let mut s = State::default();
        s.apply(&Frame::Header(Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: "node7".into(),
            driver_version: Some("580.65.06".into()),
            nvml_version: None,
            cuda_version: Some("13.0".into()),
            started: 1_796_000_000_000,
            interval_ms: 1000,
            gpus: vec![gpu(0), gpu(1)],
            gpumon_version: "0".into(),
        }));
        let info = ProcInfo {
            pid: 4242,
            user: Some("ana".into()),
            name: Some("python3".into()),
            cmdline: Some("python3 train.py --epochs 3".into()),
            ..ProcInfo::default()
        };
        s.apply(&Frame::Procs {
            t: 1_796_000_001_000,
            procs: vec![info],
        });
        let mem = MemInfo {
            total: 150_754_820_096,
            used: 75_000_000_000,
            free: 75_000_000_000,
            reserved: 754_820_096,
        };
        let sample = |index: u32, procs: Vec<ProcSample>, error: Option<String>| GpuSample {
            index,
            mem: error.is_none().then_some(mem),
            util: error.is_none().then_some(97),
            temp_c: error.is_none().then_some(61),
            power_mw: error.is_none().then_some(512_300),
            procs,
            error,
        };
        let p = ProcSample {
            pid: 4242,
            kind: Default::default(),
            used: Some(74_000_000_000),
            ..ProcSample::default()
        };
        s.apply(&Frame::Tick(Tick {
            t: 1_796_000_001_000,
            gpus: vec![
                sample(0, vec![p], None),
                sample(1, vec![], Some("GPU is lost".into())),
            ],
        }));
        s
    }

    #[test]
    fn one_line_per_gpu_and_per_process_in_columns() {
        let t = table(&state());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("host node7  driver 580.65.06  CUDA 13.0  2026-"),
            "{t}"
        );
        assert_eq!(
            lines[1], "GPU  NAME             USED    TOTAL  UTIL  TEMP  POWER",
            "{t}"
        );
        assert_eq!(
            lines[2], "0    NVIDIA H200  69.8 GiB  140 GiB   97%  61 C  512 W",
            "{t}"
        );
        assert_eq!(lines[3], "1    NVIDIA H200  error: GPU is lost", "{t}");
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], "GPU   PID  USER      USED  PROCESS", "{t}");
        assert_eq!(lines[6], "0    4242  ana   68.9 GiB  train.py", "{t}");
        assert!(
            t.is_ascii() && t.ends_with('\n') && !t.contains(" \n"),
            "{t}"
        );
    }

    #[test]
    fn no_processes_is_said() {
        let mut s = State::default();
        s.apply(&Frame::Header(Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: "h".into(),
            driver_version: None,
            nvml_version: None,
            cuda_version: None,
            started: 0,
            interval_ms: 1000,
            gpus: vec![],
            gpumon_version: "0".into(),
        }));
        let t = table(&s);
        assert!(t.ends_with("\nno GPU processes\n"), "{t}");
    }
}
