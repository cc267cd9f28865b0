// The companion protocol's shared definitions, one source for both Rust sides: the monitor
// compiles this file as `wire::protocol`, the interposer as its `protocol` module through a
// symbolic link (`preload/src/protocol.rs`), and the monitor's `wire::cross_language` tests
// check the Python companion's copies against it. Hence plain items only: no `use`, no paths
// into either crate, and no inner attributes or `//!` docs (each crate documents the module
// where it declares it).

/// The protocol version gpumon speaks (docs/protocol.md).
pub const VERSION: u32 = 1;
/// Hard limit of one companion line in bytes, newline included (docs/protocol.md, "Framing").
pub const MAX_MESSAGE_LINE: usize = 65_536;
/// Histogram buckets are `floor(log2(size))`, so anything above 63 is not a size.
pub const MAX_BUCKET: u32 = 63;

/// The one list of message types, `Variant(Payload) = "type"`, handed to the macro `$then`.
/// `peer` types are what a companion or the interposer may send; `local` ones gpumon's own
/// channel produces (so that recordings replay connection state too) and refuses from a peer.
/// `wire::Message` and [`PEER_TYPES`] / [`LOCAL_TYPES`] are both generated from it.
macro_rules! message_types {
    ($then:ident) => {
        $then! {
            peer {
                Hello(Hello) = "hello",
                Sample(Sample) = "sample",
                Frag(Frag) = "frag",
                Epoch(EpochRecord) = "epoch",
                Marker(Marker) = "marker",
                Event(FrameworkEvent) = "event",
                History(History) = "history",
                Alloc(AllocBatch) = "alloc",
                Bye(Bye) = "bye",
                Error(ErrorMsg) = "error",
            }
            local {
                Disconnected(Disconnected) = "disconnected",
                Link(LinkStats) = "link",
            }
        }
    };
}

macro_rules! type_name_lists {
    (
        peer { $($pv:ident($pp:ident) = $pn:literal,)* }
        local { $($lv:ident($lp:ident) = $ln:literal,)* }
    ) => {
        /// The `type` of every message a peer may send, in the order of `wire::Message`.
        pub const PEER_TYPES: &[&str] = &[$($pn),*];
        /// The `type` of messages only gpumon's own channel produces; refused from a peer.
        pub const LOCAL_TYPES: &[&str] = &[$($ln),*];
    };
}

message_types!(type_name_lists);
