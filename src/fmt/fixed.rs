//! `format!("{v:.d$}")` for the numbers a screen prints (sizes, axis labels), without the
//! standard library's general float formatter: that one (Grisu with a Dragon fallback) cost
//! about 540 instructions a number, 44 numbers a frame, and with the allocation of each
//! `format!` a twentieth of a redraw (callgrind of `bench/draw.rs`, issue 21).
//!
//! The result is the standard library's to the byte: the exact binary value rounded at `d`
//! decimals, ties to even. A finite `v` in 0..2^53 with `d` at most 3 is done here with
//! integer arithmetic (the value is m x 2^e, so v x 10^d is m x 10^d / 2^-e, exact in 128
//! bits); anything else (negative, not finite, larger) goes to `format!`.

use std::fmt::Write;

/// Push `v` with `decimals` decimals onto `out`, as `write!(out, "{v:.decimals$}")`.
pub fn push(out: &mut String, v: f64, decimals: usize) {
    match scaled(v, decimals) {
        Some(k) => push_scaled(out, k, decimals),
        None => {
            let _ = write!(out, "{v:.decimals$}");
        }
    }
}

/// `v` x 10^`decimals`, rounded half to even, when `push` can do `v` itself.
fn scaled(v: f64, decimals: usize) -> Option<u64> {
    if !(0.0..9_007_199_254_740_992.0).contains(&v) || v.is_sign_negative() || decimals > 3 {
        return None;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, exp - 1075)
    };
    // m < 2^53 and 10^3 < 2^10: the product is below 2^63.
    let t = u128::from(m) * u128::from(10u64.pow(decimals as u32));
    if e >= 0 {
        // v < 2^53 with e >= 0 means e = 0: an integer.
        return u64::try_from(t << e).ok();
    }
    let s = e.unsigned_abs();
    if s > 120 {
        // t < 2^63 and half of 2^s is at least 2^120: below one half, so zero.
        return Some(0);
    }
    let k = t >> s;
    let rem = t & ((1u128 << s) - 1);
    let half = 1u128 << (s - 1);
    let up = rem > half || (rem == half && k & 1 == 1);
    u64::try_from(k + u128::from(up)).ok()
}

/// `k` / 10^`decimals` written out: the whole part, and the decimals zero-padded.
fn push_scaled(out: &mut String, k: u64, decimals: usize) {
    let p = 10u64.pow(decimals as u32);
    let _ = write!(out, "{}", k / p);
    if decimals > 0 {
        let _ = write!(out, ".{:0decimals$}", k % p);
    }
}

/// `format!("{v:.decimals$}")`.
pub fn string(v: f64, decimals: usize) -> String {
    let mut out = String::with_capacity(12);
    push(&mut out, v, decimals);
    out
}

/// `format!("{v:.decimals$} {unit}")`: a size or an axis label.
pub fn with_unit(v: f64, decimals: usize, unit: &str) -> String {
    let mut out = String::with_capacity(12 + unit.len());
    push(&mut out, v, decimals);
    out.push(' ');
    out.push_str(unit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: f64) {
        for d in 0..=4 {
            assert_eq!(string(v, d), format!("{v:.d$}"), "{v:e} at {d}");
        }
        assert_eq!(
            with_unit(v, 1, "GiB"),
            format!("{v:.1} GiB"),
            "{v:e} with a unit"
        );
    }

    #[test]
    fn ties_and_edges_as_the_standard_library_writes_them() {
        let edges = [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.25,
            0.35,
            0.125,
            0.375,
            0.005,
            1.005,
            99.995,
            999.5,
            100.5,
            9.995,
            9.9995,
            1023.999,
            5e-324,
            1e-300,
            4503599627370495.5,
            9007199254740991.0,
            9007199254740992.0,
            1e300,
            -1.5,
            f64::NAN,
            f64::INFINITY,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        for v in edges {
            check(v);
        }
        // Every tie at each precision over 0..100: k/2000 is some n + 0.5 at 0 to 3 decimals
        // (the exact ones: 0.5 x 10^-d is a binary fraction only for d = 0; the rest are
        // the nearest doubles, just off a tie, which is where a shortcut goes wrong).
        for k in 0..200_000u32 {
            let v = f64::from(k) / 2000.0;
            for d in 0..=3 {
                assert_eq!(string(v, d), format!("{v:.d$}"), "{v} at {d}");
            }
        }
    }

    #[test]
    fn random_values_as_the_standard_library_writes_them() {
        // Random bit patterns over the whole range and random values of the sizes shown.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50_000 {
            check(f64::from_bits(next()));
            let r = next();
            check((r >> 11) as f64 / (1u64 << 53) as f64 * 1024.0);
        }
    }
}
