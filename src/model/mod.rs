//! Plain data model: no I/O, no terminal. Everything here is unit-tested.

pub mod alerts;
pub mod alloc_on;
pub mod allocator;
pub mod caps;
pub mod exit;
pub mod fleet;
pub mod frame;
pub mod growth_rate;
pub mod job;
pub mod job_status;
pub mod label;
pub mod mapping;
pub mod named;
pub mod placement;
pub mod sample;
pub mod series;
pub mod state;
pub mod time;
pub(crate) mod trim;
