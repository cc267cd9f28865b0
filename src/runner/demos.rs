//! The bundled recordings `gpumon demo` plays, by name. All are real runs recorded on an
//! H200 host; the default is the one that shows what gpumon is for (several GPUs, the
//! allocators of instrumented processes, fragmentation, growth alerts with forecasts).

use std::path::PathBuf;

pub(super) struct Demo {
    pub name: &'static str,
    pub file: &'static str,
    pub what: &'static str,
}

/// The default first: plain `gpumon` without a driver plays it.
pub(super) const DEMOS: [Demo; 4] = [
    Demo {
        name: "h200x2",
        file: "demo.gpumon.jsonl.gz",
        what: "2 H200s recorded for this demo: a run leaking 96 MiB/epoch (growth alert \
               with its OOM forecast), curricula whose caches fragment, allocator state \
               from companions (165 s)",
    },
    Demo {
        name: "leaks",
        file: "demo-leaks.gpumon.jsonl.gz",
        what: "2 H200s, 13 processes, 8 with companions: epoch leaks raise growth alerts \
               with an OOM forecast, a fragmentation OOM, a grab-all process (142 s)",
    },
    Demo {
        name: "fragmentation",
        file: "demo-companion.gpumon.jsonl.gz",
        what: "the same two cards with other companions: a cache that shatters until a \
               64 MiB request fits no hole (fragmentation risk, then OOM) (142 s)",
    },
    Demo {
        name: "grow-shrink",
        file: "demo-grow-shrink.gpumon.jsonl.gz",
        what: "1 H200, PyTorch growing and shrinking next to two processes that see the \
               card through different CUDA_VISIBLE_DEVICES; no companion (80 s)",
    },
];

/// Where a bundled recording lives: `GPUMON_DEMO_DIR`, next to an installed binary
/// (`../share/gpumon`), in the source tree next to a built one, or else the copy inside the
/// binary (src/embed.rs), written to the per-user cache, so an installed gpumon needs no tree.
pub(super) fn asset_path(file: &str) -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os("GPUMON_DEMO_DIR") {
        dirs.push(PathBuf::from(p));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        dirs.push(dir.join("../share/gpumon"));
        dirs.push(dir.join("../../assets"));
    }
    dirs.into_iter()
        .map(|d| d.join(file))
        .find(|p| p.is_file())
        .or_else(|| {
            crate::embed::cache_root()
                .and_then(|root| crate::embed::asset(&root, file))
                .map_err(|e| crate::say!("gpumon: {e:#}"))
                .ok()
                .flatten()
        })
}

/// The recording named `name` (`None`: the default), or why not.
pub(super) fn find(name: Option<&str>) -> Result<(&'static Demo, PathBuf), String> {
    let demo = match name {
        None => {
            // An explicit file for the default demo (packagers, tests).
            if let Some(p) = std::env::var_os("GPUMON_DEMO").map(PathBuf::from)
                && p.is_file()
            {
                return Ok((&DEMOS[0], p));
            }
            &DEMOS[0]
        }
        Some(n) => DEMOS
            .iter()
            .find(|d| d.name == n)
            .ok_or_else(|| format!("no bundled recording named '{n}'\n\n{}", list()))?,
    };
    let path = asset_path(demo.file)
        .ok_or_else(|| format!("the bundled recording {} is missing", demo.file))?;
    Ok((demo, path))
}

/// Whether `name` is a bundled recording (an unknown one is a usage error, status 2).
pub(super) fn is_known(name: &str) -> bool {
    DEMOS.iter().any(|d| d.name == name)
}

/// `gpumon demo list`: one entry per recording.
pub(super) fn list() -> String {
    let mut out = String::from("bundled recordings (gpumon demo NAME):\n");
    for (i, d) in DEMOS.iter().enumerate() {
        let default = if i == 0 { " (default)" } else { "" };
        out.push_str(&format!("  {:<14} {}{default}\n", d.name, d.what));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_recording_exists_and_opens() {
        for d in &DEMOS {
            let (_, path) = find(Some(d.name)).expect("bundled");
            crate::record::validate(&path, true).expect("a valid recording");
        }
        assert_eq!(find(None).map(|(d, _)| d.name), Ok("h200x2"));
        let err = find(Some("nope")).err().expect("unknown name");
        assert!(err.contains("grow-shrink"), "{err}");
    }
}
