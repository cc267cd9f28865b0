//! Lookups that hand out wrappers: `dlsym` and `cuGetProcAddress{,_v2}`.
//!
//! The CUDA runtime finds `cuGetProcAddress_v2` with `dlsym` on its libcuda
//! handle and then fetches its whole driver table through it, including
//! `cuGetProcAddress` itself (instrumentation.md §5.1). So both lookups return
//! our wrappers for covered names, and the `cuGetProcAddress` wrappers wrap
//! whatever they return in turn.

// Each wrapper's safety contract is exactly that of the driver function it wraps.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_int, c_void};

use crate::cuda::*;
use crate::hooks::{self, per_slot};
use crate::lifecycle::{guard_or, state};
use crate::real;
use crate::slots::{self, Entry, SLOTS, real_fn};

/// Swaps a freshly looked-up driver pointer for our wrapper when it is covered.
fn wrap_found(entry: Option<Entry>, found: *mut c_void) -> *mut c_void {
    match entry {
        Some(e) if state().is_some() => match slots::slot_for(e, found as usize) {
            Some(s) => hooks::wrapper(e, s) as *mut c_void,
            None => found,
        },
        _ => found,
    }
}

/// `dlsym` for every handle but `RTLD_NEXT` (see the trampoline below).
///
/// # Safety
/// The caller's contract is glibc's.
pub unsafe extern "C" fn dlsym_hook(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let Some(real) = real::real_dlsym() else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let found = unsafe { real(handle, symbol) };
    if found.is_null() || symbol.is_null() {
        return found;
    }
    // SAFETY: glibc just resolved `symbol`, so it is a valid C string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    if !name.starts_with(b"cu") {
        return found;
    }
    guard_or(found, || {
        let entry = Entry::from_symbol(name);
        if entry.is_some() {
            real::note_libcuda(handle);
        }
        wrap_found(entry, found)
    })
}

/// Replaces `*pfn` with our wrapper after a successful `cuGetProcAddress`.
///
/// # Safety
/// `symbol` and `pfn` are what the caller passed to the real lookup.
unsafe fn rewrap(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int) {
    if symbol.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: the driver accepted both pointers and wrote `*pfn`.
    let (name, found) = unsafe { (CStr::from_ptr(symbol).to_bytes(), pfn.read()) };
    if found.is_null() || !name.starts_with(b"cu") {
        return;
    }
    let wrapped = guard_or(found, || wrap_found(Entry::from_proc(name, version), found));
    if wrapped != found {
        // SAFETY: `pfn` is writable; the driver just wrote it.
        unsafe { pfn.write(wrapped) };
    }
}

pub unsafe extern "C" fn gpa_v1<const S: usize>(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CuStatus {
    // SAFETY: every slot of this entry holds a function of this type.
    let Some(real) = (unsafe { real_fn::<GetProcAddressFn>(Entry::GetProcAddress, S) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(symbol, pfn, version, flags) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the arguments the driver just accepted.
        unsafe { rewrap(symbol, pfn, version) };
    }
    rc
}

pub unsafe extern "C" fn gpa_v2<const S: usize>(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CuStatus {
    // SAFETY: every slot of this entry holds a function of this type.
    let Some(real) = (unsafe { real_fn::<GetProcAddressV2Fn>(Entry::GetProcAddressV2, S) }) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(symbol, pfn, version, flags, status) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the arguments the driver just accepted.
        unsafe { rewrap(symbol, pfn, version) };
    }
    rc
}

pub fn gpa_v1_wrapper(s: usize) -> usize {
    let t: [GetProcAddressFn; SLOTS] = per_slot!(gpa_v1);
    t[s % SLOTS] as usize
}

pub fn gpa_v2_wrapper(s: usize) -> usize {
    let t: [GetProcAddressV2Fn; SLOTS] = per_slot!(gpa_v2);
    t[s % SLOTS] as usize
}

#[cfg(not(test))]
mod exports {
    use super::*;

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuGetProcAddress(
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        version: c_int,
        flags: u64,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { gpa_v1::<0>(symbol, pfn, version, flags) }
    }

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cuGetProcAddress_v2(
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        version: c_int,
        flags: u64,
        status: *mut c_int,
    ) -> CuStatus {
        // SAFETY: the caller's contract is the driver's.
        unsafe { gpa_v2::<0>(symbol, pfn, version, flags, status) }
    }

    /// `dlsym` itself. glibc finds the caller from the return address: for
    /// `RTLD_NEXT` ("after the caller's object") and for `RTLD_DEFAULT` (the
    /// caller's scope, which for an object opened with `RTLD_LOCAL` includes its
    /// own dependencies). Calling the real `dlsym` from here would make the caller
    /// this library. So the trampoline *jumps* to glibc, leaving the caller's
    /// return address in place, for `RTLD_NEXT` and for every name that is not a
    /// driver entry point (`cu…`, the only names `dlsym_hook` can wrap); only
    /// `cu…` names on other handles go through `dlsym_hook`. `endbr64` keeps it a
    /// valid indirect-branch target under CET.
    #[cfg(target_arch = "x86_64")]
    #[unsafe(no_mangle)]
    #[unsafe(naked)]
    pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
        core::arch::naked_asm!(
            "endbr64",
            "cmp rdi, -1",
            "je 1f",
            // A null name, or one not starting with "cu": glibc's, unchanged. The
            // second byte is read only when the first is 'c', so never past the NUL.
            "test rsi, rsi",
            "jz 1f",
            "cmp byte ptr [rsi], 0x63",
            "jne 1f",
            "cmp byte ptr [rsi + 1], 0x75",
            "je 2f",
            "1:",
            "mov rax, qword ptr [rip + {real}]",
            "test rax, rax",
            "jz 3f",
            "jmp rax",
            "3:",
            // First lookup ever: resolve glibc's dlsym, keeping the arguments and
            // a 16-byte aligned stack across the call.
            "push rdi",
            "push rsi",
            "sub rsp, 8",
            "call {init}",
            "add rsp, 8",
            "pop rsi",
            "pop rdi",
            "test rax, rax",
            "jz 4f",
            "jmp rax",
            "4:",
            "ret",
            "2:",
            "jmp {hook}",
            real = sym crate::real::REAL_DLSYM,
            init = sym crate::real::init_real_dlsym,
            hook = sym dlsym_hook,
        )
    }

    /// Elsewhere `RTLD_NEXT` lookups are resolved relative to this library
    /// (documented limitation: correct for every object loaded after it).
    #[cfg(not(target_arch = "x86_64"))]
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
        // SAFETY: the caller's contract is glibc's.
        unsafe { dlsym_hook(handle, symbol) }
    }
}
