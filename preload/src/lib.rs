//! gpumon's native LD_PRELOAD interposer (`libgpumon_preload.so`).
//!
//! It sits between a CUDA program and `libcuda`, passes every memory call through
//! unchanged, and keeps a per-device picture of what the program holds at the
//! driver level. A lazily started reporter thread serves that picture over the
//! companion protocol (docs/protocol.md, docs/interposer.md).
//!
//! Crate map, bottom to top: each module imports only modules listed before it, and no two
//! files import each other, even indirectly (gpumon's `tests/it/architecture.rs` checks both):
//! - `clock`: wall-clock timestamps
//! - `cuda`: the FFI types (the driver's typedefs from `cuda.h`, and a raw status code)
//! - `protocol`: the protocol's constants, shared with gpumon (`src/wire/protocol.rs`)
//! - `spin`: the spin lock that `fork` handlers can take and release
//! - `ring`: the events buffered between two reporter ticks
//! - `fork`: what each part does around `fork` (it calls no other module)
//! - `hist`: the size histograms
//! - `table`: the live allocations
//! - `devices`: per-device totals
//! - `vmm`: the virtual memory management calls' bookkeeping
//! - `lifecycle`: lazy init, the pass-through switch, panic containment, the one-line stderr
//!   notices, and the bookkeeping's part of a fork
//! - `real`: finding the real `dlsym` and driver functions
//! - `epochs`: epoch markers from `gpumon_epoch()` or `GPUMON_EPOCH_SIGNAL`
//! - `reporter`: socket, handshake, messages, history (and its own part of a fork)
//! - `record`: what a successful call changes in the bookkeeping
//! - `slots`: real driver pointers and the slot whose wrapper is handed out for each
//! - `hooks`: the exported entry points, `dlsym` and `cuGetProcAddress` interception

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod clock;
pub mod cuda;
pub mod devices;
pub mod epochs;
pub mod fork;
pub mod hist;
pub mod hooks;
pub mod lifecycle;
/// The companion protocol's version, line limit, histogram range and message type names:
/// `protocol.rs` here is a link to the monitor's own definition (`src/wire/protocol.rs`), so
/// the interposer and gpumon cannot disagree, and `cargo package` of this crate stores the
/// file itself. The monitor's `wire::cross_language` tests check that this stays the
/// interposer's only source of them.
pub mod protocol;
pub mod real;
pub mod record;
pub mod reporter;
pub mod ring;
pub mod slots;
pub mod spin;
pub mod table;
pub mod vmm;
