//! Plain data model: no I/O, no terminal. Everything here is unit-tested.

pub mod alerts;
pub mod allocator;
pub mod bytes;
pub mod caps;
pub mod mapping;
pub mod sample;
pub mod series;
pub mod state;
pub mod time;
pub mod trim;
