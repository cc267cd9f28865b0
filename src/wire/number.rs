//! Lenient numbers. The protocol says "unknown is absent or null"; peers in the wild also
//! send -1 sentinels (JAX backends) or floats (`2.0`). So a number field never fails a
//! message: a whole number in range is the value, anything else (negative, fractional,
//! too big, a string, an object) is unknown.
//!
//! [`Lenient`] is the one implementation; message fields keep their plain types
//! (`Option<u64>`, `u32`, ...) and name it with `#[serde(deserialize_with = "opt")]` or
//! `"or_zero"`, so code that builds messages is unaffected.

use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

/// A protocol number of type `T`: `Some` when the JSON value is a number that is a whole
/// `T`, `None` for anything else. Deserialising it never fails on well-formed JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Lenient<T>(pub Option<T>);

/// The integer types the protocol uses, each with its range check.
pub(super) trait WireInt: Sized {
    fn from_json(n: &Number) -> Option<Self>;
}

impl WireInt for u64 {
    fn from_json(n: &Number) -> Option<u64> {
        n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        })
    }
}

impl WireInt for u32 {
    fn from_json(n: &Number) -> Option<u32> {
        u64::from_json(n).and_then(|n| u32::try_from(n).ok())
    }
}

/// Times (Unix milliseconds): negative is allowed, fractions are cut off.
impl WireInt for i64 {
    fn from_json(n: &Number) -> Option<i64> {
        n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && f.abs() < 9e18)
                .map(|f| f as i64)
        })
    }
}

impl<'de, T: WireInt> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Lenient(match Value::deserialize(d)? {
            Value::Number(n) => T::from_json(&n),
            _ => None,
        }))
    }
}

/// `deserialize_with` for an `Option<T>` field: unknown is `None`.
pub(super) fn opt<'de, D: Deserializer<'de>, T: WireInt>(d: D) -> Result<Option<T>, D::Error> {
    Lenient::<T>::deserialize(d).map(|n| n.0)
}

/// `deserialize_with` for a plain `T` field (a device index, an epoch number): unknown is 0.
pub(super) fn or_zero<'de, D: Deserializer<'de>, T: WireInt + Default>(
    d: D,
) -> Result<T, D::Error> {
    opt(d).map(Option::unwrap_or_default)
}

/// Most entries a list of sizes keeps (`free_top`, `live_top`, `requests`); the rest of a
/// longer list is ignored, so a peer cannot make gpumon hold more.
pub(super) const MAX_SIZES: usize = 8;

/// `deserialize_with` for a list of byte sizes: entries that are no whole `u64` are left
/// out, a value that is no list is empty, at most [`MAX_SIZES`] kept.
pub(super) fn sizes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_number().and_then(u64::from_json))
            .take(MAX_SIZES)
            .collect(),
        _ => Vec::new(),
    })
}

/// `deserialize_with` for `[[size, count], ...]`, leniently as [`sizes`].
pub(super) fn size_counts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u64, u64)>, D::Error> {
    let pair = |v: &Value| {
        let a = v.as_array().filter(|a| a.len() == 2)?;
        let n = |i: usize| a[i].as_number().and_then(u64::from_json);
        Some((n(0)?, n(1)?))
    };
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items.iter().filter_map(pair).take(MAX_SIZES).collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<T: WireInt>(json: &str) -> Option<T> {
        serde_json::from_str::<Lenient<T>>(json)
            .expect("any JSON value is accepted")
            .0
    }

    #[test]
    fn whole_numbers_in_range_are_values() {
        assert_eq!(read::<u64>("5"), Some(5));
        assert_eq!(read::<u64>("2.0"), Some(2));
        assert_eq!(read::<u64>("18446744073709551615"), Some(u64::MAX));
        assert_eq!(read::<u32>("4294967295"), Some(u32::MAX));
        assert_eq!(read::<i64>("-7"), Some(-7));
        assert_eq!(
            read::<i64>("1.9"),
            Some(1),
            "a fractional time is cut, not refused"
        );
    }

    #[test]
    fn everything_else_is_unknown() {
        for json in [
            "-1",
            "2.5",
            "1e20",
            "null",
            "\"5\"",
            "[5]",
            "{\"n\":5}",
            "true",
        ] {
            assert_eq!(read::<u64>(json), None, "{json}");
        }
        assert_eq!(read::<u32>("4294967296"), None);
        assert_eq!(read::<u32>("-1"), None);
        assert_eq!(read::<i64>("1e19"), None);
        assert_eq!(read::<i64>("\"5\""), None);
    }

    #[derive(serde::Deserialize)]
    struct Lists {
        #[serde(deserialize_with = "sizes")]
        s: Vec<u64>,
        #[serde(deserialize_with = "size_counts")]
        c: Vec<(u64, u64)>,
    }

    #[test]
    fn size_lists_keep_whole_sizes_and_at_most_eight() {
        let l: Lists = serde_json::from_str(
            r#"{"s":[5,-1,"x",2.0,1,2,3,4,5,6,7,8],"c":[[1,2],[3],[4,"x"],7,[9,1]]}"#,
        )
        .expect("lenient");
        assert_eq!(l.s, [5, 2, 1, 2, 3, 4, 5, 6]);
        assert_eq!(l.c, [(1, 2), (9, 1)]);
        let l: Lists = serde_json::from_str(r#"{"s":7,"c":null}"#).expect("lenient");
        assert!(l.s.is_empty() && l.c.is_empty());
    }
}
