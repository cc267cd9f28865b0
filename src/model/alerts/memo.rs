//! Answers remembered by their inputs. The engine evaluates every second, but a trend's
//! points (epochs, completed windows) change once an epoch or a window: between them the
//! same series were tested again and again (most of a 24-hour report's time, up
//! to 90 Mann–Kendall windows per process and second, and the copies to set them up).
//! An answer is used only when every input equals the one it was computed from, so it is
//! the function's own, bit for bit.
//!
//! Per thread, because the rules call these as pure functions (the engine, a replay and
//! each test evaluate on their own thread); two generations of at most `CAP` answers each:
//! the inputs asked for since the last turnover stay, older ones go (256 answers of a few
//! KiB at most per kind, whatever the run's length or the number of processes; with more
//! series than `CAP` it only recomputes).

use std::collections::HashMap;

const CAP: usize = 128;

/// A cheap mix of an input (the multiply-rotate of rustc's FxHasher): entries are
/// compared whole on a hit, so the hash only has to spread them, not resist anyone.
pub fn mix(h: u64, v: u64) -> u64 {
    (h.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

pub struct Memo<K, V> {
    new: HashMap<u64, (K, V)>,
    old: HashMap<u64, (K, V)>,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            new: HashMap::new(),
            old: HashMap::new(),
        }
    }
}

impl<K, V: Clone> Memo<K, V> {
    /// The answer stored under `hash` for the inputs `same` accepts.
    pub fn get(&mut self, hash: u64, same: impl Fn(&K) -> bool) -> Option<V> {
        if let Some((k, v)) = self.new.get(&hash)
            && same(k)
        {
            return Some(v.clone());
        }
        let (k, v) = self.old.remove(&hash).filter(|(k, _)| same(k))?;
        let answer = v.clone();
        self.new.insert(hash, (k, v));
        Some(answer)
    }

    pub fn put(&mut self, hash: u64, key: K, value: V) {
        if self.new.len() >= CAP {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(hash, (key, value));
    }
}
