//! What can go wrong with a recording, for every reader and the writer.

use std::path::PathBuf;

use crate::model::frame::FORMAT_VERSION;

/// Longest line accepted when reading: bigger lines are corruption, not data.
pub const MAX_RECORDING_LINE: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("cannot open recording {path}: {err}")]
    Open { path: PathBuf, err: std::io::Error },
    #[error("cannot read recording {path}: {err}")]
    Read { path: PathBuf, err: std::io::Error },
    /// `FILE:LINE:COLUMN: msg`, as compilers write it (editors jump there).
    #[error("{path}:{line}{}: {msg}", .column.map(|c| format!(":{c}")).unwrap_or_default())]
    Corrupt {
        path: PathBuf,
        line: usize,
        column: Option<usize>,
        msg: String,
    },
    /// Compressed data that does not decode: everything before it is good.
    #[error("{path}:{line}: {msg}")]
    CorruptCompressed {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{path}: empty file, not a gpumon recording")]
    Empty { path: PathBuf },
    #[error(
        "{path}: recording format v{found} is newer than this gpumon (reads v{FORMAT_VERSION})"
    )]
    TooNew { path: PathBuf, found: u32 },
    #[error("cannot write recording {path}: {err}")]
    Write { path: PathBuf, err: std::io::Error },
}
