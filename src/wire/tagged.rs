//! Internally tagged enums (`{"type": "sample", ...}`) read without buffering when the tag
//! comes first.
//!
//! serde's derived `#[serde(tag = "type")]` reads every object into an intermediate tree
//! (an allocation per key, string and number) before it knows the variant, and a recording
//! nests two such enums per line (a frame holding a companion message): that was most of
//! the time a 24-hour report spent reading. gpumon's recorder and the companions write the
//! tag first, so the variant is chosen from the first key and the rest of the object is
//! read straight into its struct. An object whose tag is not first (hand-written, or a
//! `serde_json::Value`, whose keys are sorted) is read through a `Value` instead, with the
//! same result.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// The key that names the variant.
pub const TAG: &str = "type";

/// An enum read by [`deserialize`]: it reads its variant named `tag` from `d`, which holds
/// the object's other fields.
pub trait Tagged: Sized {
    /// What an error says was expected (`"a recording frame"`).
    const EXPECTING: &'static str;
    /// The variants' tags, for the "unknown variant" error.
    const VARIANTS: &'static [&'static str];
    fn variant<'de, D: Deserializer<'de>>(tag: &str, d: D) -> Result<Self, D::Error>;
}

/// Reads a `T` from an object with a `type` key (see the module's comment).
pub fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(TaggedVisitor::<T>(PhantomData))
}

/// The error of a tag no variant has, as serde's derive words it.
pub fn unknown<E: de::Error, T: Tagged>(tag: &str) -> E {
    E::unknown_variant(tag, T::VARIANTS)
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<Key<'de>>()? else {
            return Err(de::Error::missing_field(TAG));
        };
        if first.0 == TAG {
            let tag: Key<'de> = map.next_value()?;
            return T::variant(&tag.0, MapAccessDeserializer::new(map));
        }
        let mut obj = serde_json::Map::new();
        obj.insert(first.0.into_owned(), map.next_value()?);
        while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
            obj.insert(k, v);
        }
        let tag = match obj.remove(TAG) {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => {
                return Err(de::Error::invalid_type(unexpected(&other), &"a string tag"));
            }
            None => return Err(de::Error::missing_field(TAG)),
        };
        T::variant(&tag, serde_json::Value::Object(obj)).map_err(de::Error::custom)
    }
}

fn unexpected(v: &serde_json::Value) -> de::Unexpected<'_> {
    use serde_json::Value;
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(_) => de::Unexpected::Other("a number"),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// A key or tag, borrowed from the input where it can be (no allocation per line).
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Deserialize)]
    struct A {
        x: u32,
        #[serde(default)]
        s: String,
    }

    #[derive(Debug, PartialEq)]
    enum E {
        A(A),
        B { y: i64 },
    }

    impl Tagged for E {
        const EXPECTING: &'static str = "a test object";
        const VARIANTS: &'static [&'static str] = &["a", "b"];
        fn variant<'de, D: Deserializer<'de>>(tag: &str, d: D) -> Result<Self, D::Error> {
            #[derive(Deserialize)]
            struct B {
                y: i64,
            }
            match tag {
                "a" => A::deserialize(d).map(E::A),
                "b" => B::deserialize(d).map(|b| E::B { y: b.y }),
                _ => Err(unknown::<D::Error, E>(tag)),
            }
        }
    }

    impl<'de> Deserialize<'de> for E {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            deserialize(d)
        }
    }

    fn read(s: &str) -> Result<E, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn the_tag_first_or_anywhere_reads_the_same() {
        let want = E::A(A {
            x: 3,
            s: "q\"".into(),
        });
        assert_eq!(read(r#"{"type":"a","x":3,"s":"q\""}"#), Ok(want));
        assert_eq!(
            read(r#"{"x":3,"type":"a","s":"q\""}"#),
            read(r#"{"type":"a","x":3,"s":"q\""}"#)
        );
        assert_eq!(read(r#"{"y":-2,"type":"b"}"#), Ok(E::B { y: -2 }));
        assert_eq!(
            read(r#"{"type":"b","y":-2,"extra":[1]}"#),
            Ok(E::B { y: -2 })
        );
        // A tag with an escape cannot be borrowed; it is still read.
        assert_eq!(read(r#"{"type":"\u0062","y":1}"#), Ok(E::B { y: 1 }));
        let v = serde_json::json!({"x": 1, "type": "a"});
        assert_eq!(
            serde_json::from_value::<E>(v).map_err(|e| e.to_string()),
            Ok(E::A(A { x: 1, s: "".into() }))
        );
    }

    #[test]
    fn a_missing_unknown_or_mistyped_tag_is_an_error_that_says_so() {
        let e = read(r#"{"type":"c","x":1}"#).unwrap_err();
        assert!(
            e.contains("unknown variant `c`, expected `a` or `b`"),
            "{e}"
        );
        let e = read(r#"{"x":1,"type":"c"}"#).unwrap_err();
        assert!(e.contains("unknown variant `c`"), "{e}");
        assert!(
            read(r#"{"x":1}"#)
                .unwrap_err()
                .contains("missing field `type`")
        );
        assert!(read(r#"{}"#).unwrap_err().contains("missing field `type`"));
        assert!(
            read(r#"{"x":1,"type":7}"#)
                .unwrap_err()
                .contains("invalid type")
        );
        assert!(
            read(r#"{"type":7,"x":1}"#)
                .unwrap_err()
                .contains("invalid type")
        );
        assert!(
            read(r#"{"type":"a","x":"no"}"#)
                .unwrap_err()
                .contains("invalid type")
        );
        assert!(read(r#"[1]"#).unwrap_err().contains("a test object"));
    }
}
