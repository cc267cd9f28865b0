//! Sampling side: produces frames, never imports ratatui.

pub mod event;
pub(crate) mod nvml;
pub mod procfs;
pub mod prometheus;
pub mod replay;
mod seen;
pub mod speed;
