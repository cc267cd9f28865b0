//! Tests that flood: a companion or a client writing as fast as it can, while the test
//! times how gpumon copes (a window of a few seconds, a latency bound). Each used to share
//! its process with the other tests of its own file only; in the one binary two floods can
//! land side by side on the two cores and starve each other past their windows. They take
//! this lock, so at most one flood runs at a time; every other test runs beside them as
//! before.

use std::sync::{Mutex, MutexGuard, PoisonError};

static FLOOD: Mutex<()> = Mutex::new(());

/// Held until dropped; another flood test waits for it.
pub struct Flood(#[allow(dead_code)] MutexGuard<'static, ()>);

/// Wait until no other flood test runs (a failed one does not block the rest).
pub fn flood() -> Flood {
    Flood(FLOOD.lock().unwrap_or_else(PoisonError::into_inner))
}
