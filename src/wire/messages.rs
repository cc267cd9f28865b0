//! The messages of the companion protocol v1 (docs/protocol.md) as Rust types.
//!
//! Every struct takes a missing field as its default (`#[serde(default)]` on the struct),
//! ignores unknown fields, and reads numbers leniently (`super::number`). Times (`t`,
//! `start_t`, `started`) are Unix milliseconds as plain `i64`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::named::{EventKind, Framework, Role};
use super::number::{opt, or_zero, size_counts, sizes};

/// Free-block histogram bucket: `(k, count, bytes)` for blocks of `2^k ..< 2^(k+1)` bytes.
pub type HistBucket = (u32, u64, u64);

/// Defines [`Message`] from the type table in `protocol.rs` (`message_types!`), so the
/// variants, their `type` names and [`Message::type_name`] cannot drift apart.
macro_rules! message_enum {
    (
        peer { $($pv:ident($pp:ident) = $pn:literal,)* }
        local { $($lv:ident($lp:ident) = $ln:literal,)* }
    ) => {
        /// Every message gpumon understands. `Disconnected` and `Link` are produced by
        /// gpumon's own channel (so that recordings replay connection state too) and
        /// are refused when a peer sends them.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "type")]
        pub enum Message {
            $(#[serde(rename = $pn)] $pv($pp),)*
            $(#[serde(rename = $ln)] $lv($lp),)*
        }

        // Read by `tagged` rather than derived: one per line of a recording, nested in a
        // frame (see there).
        impl super::tagged::Tagged for Message {
            const EXPECTING: &'static str = "a companion message";
            const VARIANTS: &'static [&'static str] = &[$($pn,)* $($ln,)*];
            fn variant<'de, D: Deserializer<'de>>(tag: &str, d: D) -> Result<Self, D::Error> {
                match tag {
                    $($pn => $pp::deserialize(d).map(Message::$pv),)*
                    $($ln => $lp::deserialize(d).map(Message::$lv),)*
                    _ => Err(super::tagged::unknown::<D::Error, Message>(tag)),
                }
            }
        }

        impl<'de> Deserialize<'de> for Message {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                super::tagged::deserialize(d)
            }
        }

        impl Message {
            /// The message's `type` on the wire.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(Message::$pv(_) => $pn,)*
                    $(Message::$lv(_) => $ln,)*
                }
            }
        }
    };
}

message_types!(message_enum);

impl Message {
    /// Device index the message is about, for coalescing samples per (pid, dev).
    pub fn dev(&self) -> Option<u32> {
        match self {
            Message::Sample(s) => Some(s.dev),
            Message::Frag(f) => Some(f.dev),
            Message::Epoch(e) => Some(e.dev),
            Message::Alloc(a) => Some(a.dev),
            Message::Event(e) => e.dev,
            _ => None,
        }
    }
}

type Na = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceInfo {
    #[serde(deserialize_with = "or_zero")]
    pub dev: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Hello {
    pub role: Role,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework: Option<Framework>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    #[serde(deserialize_with = "string_map")]
    pub settings: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    pub devices: Vec<DeviceInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_device_order: Option<String>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// A `multiprocessing` child's program: the interpreter and the `sys.argv` its parent
    /// passed it (its own command line is the bootstrap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// `MASTER_ADDR:MASTER_PORT` and `TORCHELASTIC_RUN_ID`: which job the rank belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub capabilities: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_hz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_s: Option<f64>,
    /// Process start, Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub started: Option<i64>,
    #[serde(deserialize_with = "string_map", skip_serializing_if = "Na::is_empty")]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Sample {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(deserialize_with = "or_zero")]
    pub dev: u32,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub allocated: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub active: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    /// PyTorch `inactive_split_bytes`: free pieces of split segments (its growth
    /// across epochs is a fragmentation signal).
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub inactive_split: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub peak_allocated: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub peak_reserved: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub largest_free: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub largest_alloc: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub num_alloc_retries: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub num_ooms: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub cost_us: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    #[serde(deserialize_with = "string_map", skip_serializing_if = "Na::is_empty")]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Frag {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(deserialize_with = "or_zero")]
    pub dev: u32,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub free_total: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub largest_free: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub n_free_blocks: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub n_segments: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub largest_block: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hist: Option<Vec<HistBucket>>,
    /// The largest free blocks (≥ 1 MiB), exact, largest first: the holes a large request
    /// can be served from, and their margin.
    #[serde(deserialize_with = "sizes", skip_serializing_if = "Vec::is_empty")]
    pub free_top: Vec<u64>,
    /// The largest live blocks (≥ 1 MiB), exact, largest first.
    #[serde(deserialize_with = "sizes", skip_serializing_if = "Vec::is_empty")]
    pub live_top: Vec<u64>,
    /// Allocated and reserved of this block map itself (its live blocks, its segments):
    /// one moment with T and L.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub allocated: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u64>,
    /// Large sizes the program allocated anew in at least two snapshots: `(size, times)`.
    #[serde(
        deserialize_with = "size_counts",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requests: Vec<(u64, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub cost_us: Option<u64>,
    #[serde(deserialize_with = "string_map", skip_serializing_if = "Na::is_empty")]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EpochRecord {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(deserialize_with = "or_zero")]
    pub epoch: u64,
    #[serde(deserialize_with = "or_zero")]
    pub dev: u32,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub floor: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub peak: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u64>,
    /// The epoch's start, Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub start_t: Option<i64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    #[serde(deserialize_with = "string_map", skip_serializing_if = "Na::is_empty")]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Marker {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameworkEvent {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    pub kind: EventKind,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub dev: Option<u32>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub device_free: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub free_total: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub largest_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One part of the history a companion sends on connect; `done` marks the last part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct History {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub epochs: Vec<EpochRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<Marker>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<FrameworkEvent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frag: Vec<Frag>,
    /// Absent means the last part (a sender that never splits its history).
    #[serde(default = "yes")]
    pub done: bool,
}

fn yes() -> bool {
    true
}

/// Interposer batch. `ops` are kept as raw JSON: gpumon only counts them today.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocBatch {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(deserialize_with = "or_zero")]
    pub dev: u32,
    pub ops: Vec<serde_json::Value>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub live_bytes: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub pool_reserved: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hist: Option<Vec<HistBucket>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Bye {
    /// Unix milliseconds.
    #[serde(deserialize_with = "opt", skip_serializing_if = "Option::is_none")]
    pub t: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorMsg {
    pub code: String,
    pub text: String,
}

/// gpumon-side: the connection to a companion ended; the model forgets the process.
/// `reason` is required (no `#[serde(default)]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Disconnected {
    pub reason: String,
}

/// gpumon-side counters for one connection, sent when they change. Plain (not lenient)
/// numbers: gpumon writes these itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkStats {
    /// Lines that were malformed, of a wrong version or otherwise invalid.
    pub rejected: u64,
    pub oversize: u64,
    pub unknown: u64,
    /// Frames gpumon itself dropped on the way to the screen (UI too slow).
    pub dropped: u64,
    /// Milliseconds the connection was not read because it was over its budget
    /// (`channel::budget`), and important messages dropped over their budget.
    pub throttled_ms: u64,
    pub over_budget: u64,
}

/// Settings and `na` reasons are shown as text; non-string values are rendered as JSON.
fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    let mut out = BTreeMap::new();
    if let serde_json::Value::Object(m) = v {
        for (k, v) in m {
            let s = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Null => continue,
                other => other.to_string(),
            };
            out.insert(k, s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Decoded, decode_line};
    use super::*;

    fn msg(line: &str) -> Message {
        match decode_line(line.as_bytes()) {
            Ok(Decoded::Msg(m)) => *m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn sample_with_unknown_fields_and_sentinels() {
        let m = msg(
            r#"{"v":1,"type":"sample","t":5,"dev":1,"allocated":100,"reserved":2.0,"largest_free":-1,"future_field":[1,2],"na":{"active":"cudaMallocAsync","x":null}}"#,
        );
        let Message::Sample(s) = m else {
            panic!("not a sample")
        };
        assert_eq!(s.dev, 1);
        assert_eq!(s.allocated, Some(100));
        assert_eq!(s.reserved, Some(2));
        assert_eq!(s.largest_free, None, "-1 sentinel is unknown, not a size");
        assert_eq!(
            s.na.get("active").map(String::as_str),
            Some("cudaMallocAsync")
        );
        assert!(!s.na.contains_key("x"));
    }

    #[test]
    fn messages_round_trip_through_json() {
        let m = msg(
            r#"{"v":1,"type":"frag","dev":0,"free_total":100,"largest_free":40,"hist":[[4,2,40],[5,1,60]],"source":"snapshot"}"#,
        );
        let text = serde_json::to_string(&m).expect("plain data serialises");
        assert_eq!(msg(&text), m);
        let h = msg(
            r#"{"v":1,"type":"hello","role":"companion","pid":7,"settings":{"a":"b","n":3},"devices":[{"dev":0,"uuid":"GPU-x","total":80}]}"#,
        );
        let Message::Hello(hello) = &h else {
            panic!("not a hello")
        };
        assert_eq!(hello.settings.get("n").map(String::as_str), Some("3"));
        assert_eq!(hello.devices[0].total, Some(80));
        let back: Message =
            serde_json::from_str(&serde_json::to_string(&h).expect("serialises")).expect("parses");
        assert_eq!(back, h);
    }
}
