//! `Frame`: the unit every source emits, the recorder writes and replay reads.
//! One frame is one JSON line in a recording (see docs/recording-format.md).

use serde::{Deserialize, Deserializer, Serialize};

use crate::model::alerts::AlertChange;
use crate::model::named::StatusSource;
use crate::model::sample::{GpuInfo, ProcInfo, Tick};
use crate::model::time::Ts;
use crate::wire::Message;
use crate::wire::tagged::{self, Tagged};

/// Recording format version; bumped only for incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

/// Who produced the data, written once as the first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub v: u32,
    #[serde(default)]
    pub format: String,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    pub started: Ts,
    pub interval_ms: u64,
    pub gpus: Vec<GpuInfo>,
    #[serde(default)]
    pub gpumon_version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    Header(Header),
    Tick(Tick),
    /// /proc facts for processes that appeared or changed.
    Procs {
        t: Ts,
        procs: Vec<ProcInfo>,
    },
    /// One message from an in-process companion (or interposer), as received.
    Companion(CompanionFrame),
    /// Something a source wants the user to know (NVML error, companion refused, ...).
    Status {
        t: Ts,
        source: StatusSource,
        level: Level,
        text: String,
    },
    /// An alert raised, worsened, eased or cleared (written so a recording tells its own story).
    Alert(Box<AlertChange>),
}

// Read by `wire::tagged` rather than derived: a recording is one frame per line, most of
// them holding a companion message (see there).
impl Tagged for Frame {
    const EXPECTING: &'static str = "a recording frame";
    const VARIANTS: &'static [&'static str] =
        &["header", "tick", "procs", "companion", "status", "alert"];
    fn variant<'de, D: Deserializer<'de>>(tag: &str, d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Procs {
            t: Ts,
            procs: Vec<ProcInfo>,
        }
        #[derive(Deserialize)]
        struct Status {
            t: Ts,
            source: StatusSource,
            level: Level,
            text: String,
        }
        match tag {
            "header" => Header::deserialize(d).map(Frame::Header),
            "tick" => Tick::deserialize(d).map(Frame::Tick),
            "procs" => Procs::deserialize(d).map(|p| Frame::Procs {
                t: p.t,
                procs: p.procs,
            }),
            "companion" => CompanionFrame::deserialize(d).map(Frame::Companion),
            "status" => Status::deserialize(d).map(|s| Frame::Status {
                t: s.t,
                source: s.source,
                level: s.level,
                text: s.text,
            }),
            "alert" => Box::<AlertChange>::deserialize(d).map(Frame::Alert),
            _ => Err(tagged::unknown::<D::Error, Frame>(tag)),
        }
    }
}

impl<'de> Deserialize<'de> for Frame {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

/// One message from one companion as gpumon received it; `t` is gpumon's
/// clock at arrival (the message's own `t` is the companion's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompanionFrame {
    pub t: Ts,
    pub pid: u32,
    pub msg: Message,
}

impl Frame {
    /// The data time of the frame, used as the model's clock.
    pub fn time(&self) -> Ts {
        match self {
            Frame::Header(h) => h.started,
            Frame::Tick(t) => t.t,
            Frame::Procs { t, .. } | Frame::Status { t, .. } => *t,
            Frame::Companion(c) => c.t,
            Frame::Alert(a) => a.at,
        }
    }

    pub fn status(t: Ts, source: StatusSource, level: Level, text: impl Into<String>) -> Frame {
        Frame::Status {
            t,
            source,
            level,
            text: text.into(),
        }
    }
}

#[cfg(test)]
impl Header {
    /// A header for unit tests: these GPUs, everything else blank.
    pub(crate) fn bare(gpus: Vec<GpuInfo>) -> Header {
        Header {
            v: FORMAT_VERSION,
            format: "gpumon".into(),
            host: "h".into(),
            driver_version: None,
            nvml_version: None,
            cuda_version: None,
            started: 0,
            interval_ms: 1000,
            gpus,
            gpumon_version: String::new(),
        }
    }
}
