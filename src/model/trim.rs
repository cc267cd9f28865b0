//! Returning freed heap to the system.
//!
//! glibc keeps freed memory in its arenas, so after a companion that held
//! hundreds of MB goes, gpumon's RSS would stay at its high-water mark for the
//! rest of the run (2 GB measured under a flooding companion). `malloc_trim` hands
//! the free pages back; it is glibc-only, so elsewhere this does nothing.

pub(crate) fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own free lists; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}
