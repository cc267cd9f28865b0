//! Companion channel (placeholder until the channel lands).
use serde::{Deserialize, Serialize};

use crate::model::time::Ts;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompanionFrame {
    pub t: Ts,
    pub pid: u32,
    pub msg: serde_json::Value,
}
