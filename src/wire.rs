//! Messages of the companion protocol v1 (docs/protocol.md) and a decoder that
//! never trusts its input: a hard line limit, version check, lenient numbers
//! (a negative or fractional "size" is unknown, not an error), unknown fields
//! ignored and unknown types reported for counting.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::model::time::Ts;

/// The protocol version this gpumon speaks.
pub const VERSION: u32 = 1;
/// Hard limit of one line in bytes, newline included.
pub const MAX_LINE: usize = 65_536;
/// Histogram buckets are `floor(log2(size))`, so anything above 63 is not a size.
pub const MAX_BUCKET: u32 = 63;

/// Free-block histogram bucket: `(k, count, bytes)` for blocks of `2^k ..< 2^(k+1)` bytes.
pub type HistBucket = (u32, u64, u64);

/// Every message gpumon understands. `Disconnected` and `Link` are produced by
/// gpumon's own channel (so that recordings replay connection state too) and
/// are refused when a peer sends them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    Hello(Hello),
    Sample(Sample),
    Frag(Frag),
    Epoch(EpochRecord),
    Marker(Marker),
    Event(Event),
    History(History),
    Alloc(AllocBatch),
    Bye(Bye),
    Error(ErrorMsg),
    Disconnected(Disconnected),
    Link(LinkStats),
}

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

    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::Sample(_) => "sample",
            Message::Frag(_) => "frag",
            Message::Epoch(_) => "epoch",
            Message::Marker(_) => "marker",
            Message::Event(_) => "event",
            Message::History(_) => "history",
            Message::Alloc(_) => "alloc",
            Message::Bye(_) => "bye",
            Message::Error(_) => "error",
            Message::Disconnected(_) => "disconnected",
            Message::Link(_) => "link",
        }
    }
}

type Na = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    #[serde(default, deserialize_with = "lenient_u32")]
    pub dev: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub total: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Hello {
    #[serde(default)]
    pub role: String,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub pid: Option<u32>,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub ns_pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    #[serde(default, deserialize_with = "string_map")]
    pub settings: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_device_order: Option<String>,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub rank: Option<u32>,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub local_rank: Option<u32>,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub world_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_hz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_s: Option<f64>,
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub started: Option<Ts>,
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "Na::is_empty"
    )]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Sample {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub dev: u32,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocated: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub active: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub requested: Option<u64>,
    /// PyTorch `inactive_split_bytes`: free pieces of split segments (issue 13: its growth
    /// across epochs is a fragmentation signal).
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub inactive_split: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub peak_allocated: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub peak_reserved: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub limit: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub largest_free: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub largest_alloc: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub num_alloc_retries: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub num_ooms: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub epoch: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub cost_us: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub dropped: Option<u64>,
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "Na::is_empty"
    )]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Frag {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub dev: u32,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub free_total: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub largest_free: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub n_free_blocks: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub n_segments: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub largest_block: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hist: Option<Vec<HistBucket>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub cost_us: Option<u64>,
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "Na::is_empty"
    )]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EpochRecord {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub epoch: u64,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub dev: u32,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub floor: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub peak: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_t: Option<Ts>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub steps: Option<u64>,
    #[serde(
        default,
        deserialize_with = "string_map",
        skip_serializing_if = "Na::is_empty"
    )]
    pub na: Na,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Marker {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub epoch: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub step: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Event {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default)]
    pub kind: String,
    #[serde(
        default,
        deserialize_with = "opt_u32",
        skip_serializing_if = "Option::is_none"
    )]
    pub dev: Option<u32>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub requested: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub limit: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub device_free: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub free_total: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub largest_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One part of the history a companion sends on connect; `done` marks the last part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct History {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epochs: Vec<EpochRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub markers: Vec<Marker>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frag: Vec<Frag>,
    #[serde(default = "yes")]
    pub done: bool,
}

fn yes() -> bool {
    true
}

/// Interposer batch. `ops` are kept as raw JSON: gpumon only counts them today.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AllocBatch {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, deserialize_with = "lenient_u32")]
    pub dev: u32,
    #[serde(default)]
    pub ops: Vec<serde_json::Value>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub live_bytes: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub peak_bytes: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub pool_reserved: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hist: Option<Vec<HistBucket>>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Bye {
    #[serde(
        default,
        deserialize_with = "opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub t: Option<Ts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ErrorMsg {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub text: String,
}

/// gpumon-side: the connection to a companion ended; the model forgets the process.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Disconnected {
    pub reason: String,
}

/// gpumon-side counters for one connection, sent when they change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LinkStats {
    /// Lines that were malformed, of a wrong version or otherwise invalid.
    #[serde(default)]
    pub rejected: u64,
    #[serde(default)]
    pub oversize: u64,
    #[serde(default)]
    pub unknown: u64,
    /// Frames gpumon itself dropped on the way to the screen (UI too slow).
    #[serde(default)]
    pub dropped: u64,
    /// Milliseconds the connection was not read because it was over its budget
    /// (`channel::budget`), and important messages dropped over their budget.
    #[serde(default)]
    pub throttled_ms: u64,
    #[serde(default)]
    pub over_budget: u64,
}

/// Why a line was refused. Every variant is counted; none is fatal on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    #[error("line of {0} bytes exceeds the {MAX_LINE}-byte limit")]
    Oversize(usize),
    #[error("line is not UTF-8")]
    NotUtf8,
    #[error("not JSON: {0}")]
    Json(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("no \"type\" field")]
    NoType,
    #[error("protocol version {0}; this gpumon speaks v{VERSION}")]
    Version(u64),
    #[error("invalid {kind} message: {err}")]
    Invalid { kind: String, err: String },
    #[error("{0:?} is gpumon-internal and not accepted from a peer")]
    Local(String),
}

/// A decoded line: a message, or a type this gpumon does not know (skipped, counted).
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Msg(Box<Message>),
    Unknown(String),
}

/// Decode one line (without or with its trailing newline).
pub fn decode_line(line: &[u8]) -> Result<Decoded, Reject> {
    if line.len() > MAX_LINE {
        return Err(Reject::Oversize(line.len()));
    }
    let text = std::str::from_utf8(line).map_err(|_| Reject::NotUtf8)?;
    let value: serde_json::Value =
        serde_json::from_str(text.trim_end()).map_err(|e| Reject::Json(e.to_string()))?;
    let obj = value.as_object().ok_or(Reject::NotObject)?;
    match obj.get("v") {
        None | Some(serde_json::Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if n == u64::from(VERSION) => {}
            Some(n) => return Err(Reject::Version(n)),
            None => {
                return Err(Reject::Invalid {
                    kind: "?".into(),
                    err: "\"v\" is not a version number".into(),
                });
            }
        },
    }
    let kind = obj
        .get("type")
        .and_then(|t| t.as_str())
        .ok_or(Reject::NoType)?
        .to_string();
    match kind.as_str() {
        "hello" | "sample" | "frag" | "epoch" | "marker" | "event" | "history" | "alloc"
        | "bye" | "error" => {}
        "disconnected" | "link" => return Err(Reject::Local(kind)),
        _ => return Ok(Decoded::Unknown(kind)),
    }
    let msg: Message = serde_json::from_value(value).map_err(|e| Reject::Invalid {
        kind: kind.clone(),
        err: e.to_string(),
    })?;
    validate(&msg).map_err(|err| Reject::Invalid { kind, err })?;
    Ok(Decoded::Msg(Box::new(msg)))
}

fn validate(msg: &Message) -> Result<(), String> {
    let hist_ok = |h: &Option<Vec<HistBucket>>| match h {
        Some(h) if h.iter().any(|b| b.0 > MAX_BUCKET) => {
            Err(format!("histogram bucket above {MAX_BUCKET}"))
        }
        _ => Ok(()),
    };
    match msg {
        Message::Frag(f) => hist_ok(&f.hist),
        Message::Alloc(a) => hist_ok(&a.hist),
        Message::History(h) => h.frag.iter().try_for_each(|f| hist_ok(&f.hist)),
        _ => Ok(()),
    }
}

/// The monitor's side of the handshake, one line with its newline.
pub fn monitor_hello() -> String {
    format!(
        "{{\"v\":{VERSION},\"type\":\"hello\",\"role\":\"monitor\",\"min_v\":{VERSION},\"max_v\":{VERSION},\"client\":\"gpumon {}\"}}\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// One complete line out of a byte stream, or the size of a line that was
/// over the limit (its bytes already thrown away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(Vec<u8>),
    Oversize(usize),
}

/// Splits a byte stream into lines while holding at most `MAX_LINE` bytes:
/// an oversize line is skipped up to its newline instead of buffered.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Bytes of an oversize line seen so far; `Some` while skipping it.
    skipping: Option<usize>,
}

impl LineSplitter {
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<Line>) {
        while !data.is_empty() {
            let nl = data.iter().position(|&b| b == b'\n');
            let (chunk, rest, complete) = match nl {
                Some(i) => (&data[..i], &data[i + 1..], true),
                None => (data, &data[data.len()..], false),
            };
            data = rest;
            if let Some(n) = self.skipping.as_mut() {
                *n += chunk.len() + usize::from(complete);
                if complete {
                    out.push(Line::Oversize(*n));
                    self.skipping = None;
                }
                continue;
            }
            // The newline counts towards the limit.
            if self.buf.len() + chunk.len() + usize::from(complete) > MAX_LINE {
                let n = self.buf.len() + chunk.len() + usize::from(complete);
                self.buf.clear();
                if complete {
                    out.push(Line::Oversize(n));
                } else {
                    self.skipping = Some(n);
                }
                continue;
            }
            self.buf.extend_from_slice(chunk);
            if complete {
                out.push(Line::Text(std::mem::take(&mut self.buf)));
            }
        }
    }

    /// Bytes of an over-long line skipped so far, while its newline has not come.
    pub fn skipping(&self) -> Option<usize> {
        self.skipping
    }

    /// Bytes currently buffered (for the memory bound test).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

// Lenient number decoding: the protocol says "unknown is absent or null";
// peers in the wild also send -1 sentinels (JAX backends) or floats.
fn to_u64(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(to_u64(&v))
}

fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(to_u64(&v).and_then(|n| u32::try_from(n).ok()))
}

fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match &v {
        serde_json::Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && f.abs() < 9e18)
                .map(|f| f as i64)
        }),
        _ => None,
    })
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    opt_u64(d).map(|v| v.unwrap_or(0))
}

fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    opt_u32(d).map(|v| v.unwrap_or(0))
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
    fn rejects_are_classified() {
        assert!(matches!(decode_line(b"{nope"), Err(Reject::Json(_))));
        assert_eq!(decode_line(b"[1,2]"), Err(Reject::NotObject));
        assert_eq!(decode_line(b"{\"v\":1}"), Err(Reject::NoType));
        assert_eq!(
            decode_line(b"{\"v\":2,\"type\":\"sample\"}"),
            Err(Reject::Version(2))
        );
        assert_eq!(decode_line(&[0xff, 0xfe]), Err(Reject::NotUtf8));
        assert_eq!(
            decode_line(b"{\"type\":\"link\"}"),
            Err(Reject::Local("link".into()))
        );
        assert_eq!(
            decode_line(b"{\"v\":1,\"type\":\"telemetry2\"}"),
            Ok(Decoded::Unknown("telemetry2".into()))
        );
        assert!(matches!(
            decode_line(b"{\"v\":1,\"type\":\"frag\",\"hist\":[[64,1,1]]}"),
            Err(Reject::Invalid { .. })
        ));
        assert!(matches!(
            decode_line(b"{\"v\":1,\"type\":\"sample\",\"settings\":3,\"na\":\"x\"}"),
            Ok(Decoded::Msg(_))
        ));
        let big = vec![b' '; MAX_LINE + 1];
        assert_eq!(decode_line(&big), Err(Reject::Oversize(MAX_LINE + 1)));
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

    #[test]
    fn monitor_hello_is_a_valid_line() {
        let line = monitor_hello();
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(line.trim()).expect("valid JSON");
        assert_eq!(v["min_v"], 1);
        assert_eq!(v["role"], "monitor");
    }

    #[test]
    fn splitter_skips_oversize_lines_without_buffering_them() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.feed(b"ab\nc", &mut out);
        assert_eq!(out, vec![Line::Text(b"ab".to_vec())]);
        out.clear();
        let big = vec![b'x'; MAX_LINE * 2];
        s.feed(&big, &mut out);
        assert!(s.buffered() <= MAX_LINE);
        s.feed(b"tail\nok\n", &mut out);
        assert_eq!(
            out,
            vec![
                Line::Oversize(1 + MAX_LINE * 2 + 5),
                Line::Text(b"ok".to_vec())
            ]
        );
        // Exactly at the limit (newline included) is accepted.
        out.clear();
        let mut exact = vec![b'y'; MAX_LINE - 1];
        exact.push(b'\n');
        s.feed(&exact, &mut out);
        assert_eq!(out, vec![Line::Text(vec![b'y'; MAX_LINE - 1])]);
    }
}
