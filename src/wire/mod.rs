//! The companion protocol v1 (docs/protocol.md): what the Python companion and the native
//! interposer send, and a decoder that never trusts its input: a hard line limit, version
//! check, lenient numbers (a negative or fractional "size" is unknown, not an error),
//! unknown fields ignored and unknown types reported for counting.
//!
//! - `protocol`: the constants and the message type table shared with the interposer
//!   (which `include!`s the file) and checked against the Python companion
//!   (`cross_language`, a test)
//! - `named`: the protocol's vocabularies (framework, event kind, role), typed, and `named!`
//! - `messages`: the message enum and structs
//! - `handling`: each type's rule in gpumon (periodic / important / control, evaluate now)
//! - `number`: lenient numbers, the one `Deserialize` behind every number field
//! - `tagged`: internally tagged enums read without buffering when the tag comes first
//! - `decode`: line splitting, decoding, and the reasons a line is refused
//!
//! This module is the bottom layer: it uses nothing from the rest of gpumon.

#[macro_use]
mod protocol;
mod decode;
mod handling;
mod messages;
mod named;
mod number;
pub mod tagged;

#[cfg(test)]
mod cross_language;

pub use decode::{Decoded, Line, LineSplitter, Reject, decode_line, monitor_hello};
pub use handling::{Class, Lane, Rule};
pub use messages::{
    AllocBatch, Bye, DeviceInfo, Disconnected, EpochRecord, ErrorMsg, Frag, FrameworkEvent, Hello,
    HistBucket, History, LinkStats, Marker, Message, Sample,
};
pub(crate) use named::named;
pub use named::{EventKind, Framework, Role};
pub use protocol::{LOCAL_TYPES, MAX_BUCKET, MAX_MESSAGE_LINE, PEER_TYPES, VERSION};
