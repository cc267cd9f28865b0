//! Allocator state reported by companions (placeholder until the channel lands).
use std::collections::BTreeMap;

use crate::channel::CompanionFrame;
use crate::model::time::Ts;

#[derive(Debug, Default, Clone)]
pub struct Companions {
    pub by_pid: BTreeMap<u32, ()>,
}

impl Companions {
    pub fn apply(&mut self, _frame: &CompanionFrame) {}
    pub fn expire(&mut self, _now: Ts) {}
}
