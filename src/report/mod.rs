//! `gpumon report`: a recording told as a shareable page. The recording is replayed through
//! the same pipeline as every mode (`feed`), what the page needs is gathered on the way
//! (`collect`, series kept by `minmax`), and written as one self-contained HTML file
//! (`html`: `summary` on top, `charts` drawn by `svg`) or as Markdown (`markdown`).

pub mod alerts;
pub mod charts;
pub mod collect;
pub mod feed;
pub mod html;
pub mod markdown;
pub mod minmax;
pub mod summary;
pub mod svg;

use std::path::Path;

use crate::pipeline::Pipeline;

pub use feed::ReportError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Html,
    Md,
}

/// The report of `recording` in `format`, replayed through `pipe` (its alert thresholds).
/// Blocks on the replay thread: call it outside an async runtime.
pub fn render(recording: &Path, pipe: Pipeline, format: Format) -> Result<String, ReportError> {
    let run = feed::replay_run(recording, pipe)?;
    Ok(match format {
        Format::Html => html::page(&run),
        Format::Md => markdown::markdown(&run),
    })
}

/// Where a report goes when no `-o` is given: next to the recording, its name with
/// `.report.html` (or `.report.md`) in place of the recording's extensions.
pub fn default_output(recording: &Path, format: Format) -> std::path::PathBuf {
    let name = recording
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "recording".into());
    let stem = [
        ".gpumon.jsonl.gz",
        ".gpumon.jsonl.zst",
        ".gpumon.jsonl",
        ".jsonl.gz",
        ".jsonl.zst",
        ".jsonl",
        ".gz",
        ".zst",
    ]
    .iter()
    .find_map(|ext| name.strip_suffix(ext))
    .unwrap_or(&name)
    .to_string();
    let ext = match format {
        Format::Html => "report.html",
        Format::Md => "report.md",
    };
    recording.with_file_name(format!("{stem}.{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_output_sits_next_to_the_recording() {
        let p = default_output(Path::new("/runs/night.gpumon.jsonl"), Format::Html);
        assert_eq!(p, Path::new("/runs/night.report.html"));
        let p = default_output(Path::new("x.jsonl.gz"), Format::Md);
        assert_eq!(p, Path::new("x.report.md"));
        let p = default_output(Path::new("plain"), Format::Html);
        assert_eq!(p, Path::new("plain.report.html"));
    }
}
