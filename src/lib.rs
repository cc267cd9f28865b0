//! gpumon: a live terminal GPU memory monitor.
//!
//! Rooms, bottom to top; each imports only rooms listed before it (checked by the
//! `architecture` test). CONTRIBUTING.md draws the roads between them.
//! - `wire`: the companion protocol, one definition for monitor, interposer and Python
//! - `fmt`: bytes and durations as people read them
//! - `model`: plain data: `Frame`, samples, series, state, mapping, allocator, alerts
//! - `source`: NVML sampler, /proc reader, replay (never touch the terminal)
//! - `channel`: the companion channel (sockets, identity, budgets) producing frames
//! - `record`: recording writer and reader
//! - `export`: Prometheus metrics, HTTP endpoint, flat logs, `snapshot --json`
//! - `pipeline`: frames in, `State` + alerts + recording + exports out; the filter
//! - `tui`: the terminal front end: app state and input, keys, terminal guard, events, `ui`
//! - `report`: `gpumon report`, a recording replayed through the pipeline and told as a page
//! - `runner`: the event loops (terminal and headless) that wire sources to the pipeline
//! - `cli`, `config`, `launch` (`gpumon run`), `embed` (bundled interposer and demos)

// The compiler keeps the house clean: a `pub` nothing outside can reach, or code nothing
// calls, fails the build.
#![deny(unreachable_pub, dead_code)]

pub mod channel;
pub mod cli;
pub mod config;
pub(crate) mod embed;
pub mod export;
pub mod fmt;
pub(crate) mod launch;
pub mod model;
pub mod pipeline;
pub mod record;
pub mod report;
pub mod runner;
pub mod source;
pub mod tui;
pub mod wire;
