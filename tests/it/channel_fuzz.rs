//! The decoder and line splitter never panic, whatever the bytes, and never
//! hold more than one line's worth of memory.

use gpumon::wire::{Decoded, Line, LineSplitter, MAX_MESSAGE_LINE, decode_line};
use proptest::prelude::*;

fn json_ish() -> impl Strategy<Value = Vec<u8>> {
    let kinds = prop_oneof![
        Just("hello"),
        Just("sample"),
        Just("frag"),
        Just("epoch"),
        Just("marker"),
        Just("event"),
        Just("history"),
        Just("alloc"),
        Just("bye"),
        Just("error"),
        Just("link"),
        Just("disconnected"),
        Just("nope"),
    ];
    let value = prop_oneof![
        Just("null".to_string()),
        Just("-1".to_string()),
        Just("1e300".to_string()),
        Just("18446744073709551616".to_string()),
        Just("[[64,1,1]]".to_string()),
        Just("[[3,1,2],[\"x\"]]".to_string()),
        Just("{}".to_string()),
        Just("\"s\"".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
    ];
    let field = prop_oneof![
        Just("dev"),
        Just("allocated"),
        Just("hist"),
        Just("epochs"),
        Just("samples"),
        Just("devices"),
        Just("settings"),
        Just("na"),
        Just("v"),
        Just("t"),
        Just("ops"),
    ];
    (kinds, proptest::collection::vec((field, value), 0..6)).prop_map(|(k, fields)| {
        let mut s = format!("{{\"type\":\"{k}\"");
        for (f, v) in fields {
            s.push_str(&format!(",\"{f}\":{v}"));
        }
        s.push('}');
        s.into_bytes()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_line(&bytes);
    }

    #[test]
    fn decoder_never_panics_on_json_shaped_input(line in json_ish()) {
        if let Ok(Decoded::Msg(m)) = decode_line(&line) {
            // Whatever was accepted also survives the recording round trip.
            let text = serde_json::to_string(&m).expect("accepted messages serialise");
            let back: gpumon::wire::Message = serde_json::from_str(&text).expect("and parse back");
            prop_assert_eq!(back, *m);
        }
    }

    #[test]
    fn splitter_bounds_memory_and_keeps_short_lines(
        chunks in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..64),
                (1usize..3).prop_map(|k| vec![b'z'; k * MAX_MESSAGE_LINE / 2 + 7]),
                Just(b"\n".to_vec()),
            ],
            0..24,
        )
    ) {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        let mut total = 0usize;
        for c in &chunks {
            total += c.len();
            s.feed(c, &mut out);
            prop_assert!(s.buffered() <= MAX_MESSAGE_LINE);
        }
        let mut seen = 0usize;
        for l in &out {
            match l {
                Line::Text(t) => {
                    prop_assert!(t.len() < MAX_MESSAGE_LINE);
                    prop_assert!(!t.contains(&b'\n'));
                    seen += t.len() + 1;
                }
                Line::Oversize(n) => {
                    prop_assert!(*n > MAX_MESSAGE_LINE);
                    seen += n;
                }
            }
        }
        prop_assert_eq!(seen + s.buffered() <= total, true);
    }
}
