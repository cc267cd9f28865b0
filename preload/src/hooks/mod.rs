//! The interposer's entry points: wrappers of the driver's memory functions
//! (`mem`) and the lookups that hand those wrappers out (`lookup`).

pub mod lookup;
pub mod mem;

use crate::slots::{Entry, SLOTS};

/// One instance per slot of a generic wrapper, as an array.
macro_rules! per_slot {
    ($f:ident) => {
        [
            $f::<0>, $f::<1>, $f::<2>, $f::<3>, $f::<4>, $f::<5>, $f::<6>, $f::<7>,
        ]
    };
}
pub(crate) use per_slot;

/// The address of the wrapper instance for `(entry, slot)`.
pub fn wrapper(entry: Entry, slot: usize) -> usize {
    let s = slot % SLOTS;
    match entry {
        Entry::GetProcAddress => lookup::gpa_v1_wrapper(s),
        Entry::GetProcAddressV2 => lookup::gpa_v2_wrapper(s),
        other => mem::wrapper(other, s),
    }
}
