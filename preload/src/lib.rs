//! gpumon's native LD_PRELOAD interposer (`libgpumon_preload.so`).
//!
//! It sits between a CUDA program and `libcuda`, passes every memory call through
//! unchanged, and keeps a per-device picture of what the program holds at the
//! driver level. A lazily started reporter thread serves that picture over the
//! companion protocol (docs/protocol.md, docs/interposer.md).
//!
//! Crate map:
//! - `cuda`: the FFI types (cudarc's driver types plus a raw status code)
//! - `hooks`: the exported entry points, `dlsym` and `cuGetProcAddress` interception
//! - `slots`: real driver pointers and the wrapper handed out for each of them
//! - `real`: finding the real `dlsym` and driver functions
//! - `record`: what a successful call changes in the bookkeeping
//! - `table`, `vmm`, `devices`, `hist`, `ring`: the bookkeeping itself
//! - `protocol`: the protocol's constants, shared with gpumon (`src/wire/protocol.rs`)
//! - `reporter`: socket, handshake, messages, history
//! - `epochs`: epoch markers from `gpumon_epoch()` or `GPUMON_EPOCH_SIGNAL`
//! - `lifecycle`: lazy init, fork and exit handling, the one-line stderr notices

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod clock;
pub mod cuda;
pub mod devices;
pub mod epochs;
pub mod hist;
pub mod hooks;
pub mod lifecycle;
pub mod protocol;
pub mod real;
pub mod record;
pub mod reporter;
pub mod ring;
pub mod slots;
pub mod spin;
pub mod table;
pub mod vmm;
