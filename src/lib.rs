//! gpumon: a live terminal GPU memory monitor.
//!
//! Rooms, bottom to top; each imports only rooms listed before it (checked by the
//! `architecture` test, whose table lists them in this order). CONTRIBUTING.md draws the
//! roads between them.
//! - `wire`: the companion protocol, one definition for monitor, interposer and Python
//! - `fmt`: bytes and durations as people read them
//! - `model`: plain data: `Frame`, samples, series, state, mapping, allocator, alerts
//! - `settings`: what the configuration file sets, as plain values handed to the modes
//! - `channel`: the companion channel (sockets, identity, budgets) producing frames
//! - `record`: recording writer and reader
//! - `source`: NVML sampler, /proc reader, replay of recordings, the loop's `Event` (never
//!   touch the terminal)
//! - `export`: Prometheus metrics, HTTP endpoint, flat logs, `snapshot --json`
//! - `pipeline`: frames in, `State` + alerts + recording + exports out; the filter
//! - `tui`: the terminal front end: app state and input, keys, terminal guard, `ui`
//! - `report`: `gpumon report`, a recording replayed through the pipeline and told as a page
//! - `embed`: the bundled interposer and demos, unpacked into the companion directory
//! - `launch`: `gpumon run`, a command started with the interposer
//! - `cli`: the command line
//! - `config`: the configuration file, applied over the command line, yielding `Settings`
//! - `runner`: the event loops (terminal and headless) that wire sources to the pipeline

// A `pub` nothing outside the crate can reach, or a private item nothing calls, fails the
// build. That is all the build promises: the rooms are `pub` because the integration tests,
// fuzzers and the bench drive them directly, so a `pub` item only they call (test entry
// points such as `Painter::checked`, `ui::draw_checked`, `AlertEngine::visible`,
// `export::http::serve_stream`) looks used, and so would a `pub` item nothing calls at all.
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
pub mod settings;
pub mod source;
pub mod tui;
pub mod wire;
