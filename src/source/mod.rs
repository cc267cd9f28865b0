//! Sampling side: produces frames, never imports ratatui.

pub mod nvml;
pub mod procfs;
pub mod replay;
