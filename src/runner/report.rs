//! `gpumon report` and `gpumon record --report`: the page is written from the recording,
//! replayed through a pipeline configured like every other mode's (alert thresholds).

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::{OutputArgs, ReportArgs};
use crate::pipeline::Pipeline;
use crate::report::{Format, default_output, render};
use crate::settings::Settings;

pub(super) fn report(r: &ReportArgs, settings: &Settings) -> Result<i32> {
    let out = match (&r.output, r.format) {
        (Some(p), _) if p.as_os_str() == "-" => None,
        (Some(p), _) => Some(p.clone()),
        // A recording read from stdin has no place to sit beside: the page goes to stdout.
        (None, Format::Html) if r.file.as_os_str() == "-" => None,
        (None, Format::Html) => Some(default_output(&r.file, Format::Html)),
        (None, Format::Md) => None,
    };
    write_report(
        &r.file,
        out.as_deref(),
        r.format,
        r.alerts_config.clone(),
        settings,
    )?;
    Ok(0)
}

/// Replay `recording` and write its report to `out` (stdout when `None`). The file appears
/// whole or not at all (`fmt::out_file`: never through a planted link, never a rename over
/// a device or FIFO, which are written in place).
pub(super) fn write_report(
    recording: &Path,
    out: Option<&Path>,
    format: Format,
    alerts_config: Option<std::path::PathBuf>,
    settings: &Settings,
) -> Result<()> {
    let mut pipe = Pipeline::default();
    super::configure(
        &mut pipe,
        &OutputArgs {
            alerts_config,
            ..OutputArgs::default()
        },
        settings,
    )?;
    // Past `ulimit -f` a write fails with EFBIG (said, temp file removed) instead of a
    // silent death by SIGXFSZ.
    crate::record::ignore_sigxfsz();
    let text = render(recording, pipe, format)?;
    let Some(out) = out else {
        // A full disk or EFBIG is an error (one line, exit 1); a reader gone early is not
        // (`| head`, as every stdout output).
        return Ok(crate::fmt::print_stdout(text.as_bytes())?);
    };
    crate::fmt::out_file::write_whole(out, text.as_bytes())
        .with_context(|| format!("cannot write report {}", out.display()))?;
    eprintln!("gpumon: report written to {}", out.display());
    Ok(())
}
