//! gpumon: a live terminal GPU memory monitor.
//!
//! Crate map:
//! - `model`: series, samples, index mapping, allocator state, alerts (plain, tested Rust)
//! - `frame`: the unit sources emit and recordings store
//! - `source`: NVML sampler, replay, /proc reader (never touch the UI)
//! - `channel`: the companion channel
//! - `record`: recording writer/reader
//! - `app`: TEA state + update; `ui`: render functions that only read state
//! - `keys`: the key table; `selection`: sort, filter and selection by identity;
//!   `signal`: sending a signal to a monitored process
//! - `cli`, `term`: argument parsing and terminal guard

pub mod app;
pub mod channel;
pub mod cli;
pub mod config;
pub mod embed;
pub mod event;
pub mod export;
pub mod filter;
pub mod frame;
pub mod keys;
pub mod model;
pub mod pipeline;
pub mod record;
pub mod record_budget;
pub mod run_cmd;
pub mod runner;
pub mod selection;
pub mod signal;
pub mod snapshot;
pub mod source;
pub mod term;
pub mod ui;
pub mod wire;
pub mod workload;
