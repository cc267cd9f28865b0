//! placeholder
pub fn ensure_started() {}
pub fn lock_for_fork() {}
pub unsafe fn unlock_after_fork() {}
pub fn reset_in_child() {}
