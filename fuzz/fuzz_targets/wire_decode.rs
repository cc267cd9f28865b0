//! The companion wire: bytes in any split through the line splitter, each line
//! through the decoder, each message into the model — which must stay within
//! its stated memory ceiling whatever arrives.
#![no_main]

use gpumon::model::frame::CompanionFrame;
use gpumon::model::allocator::Companions;
use gpumon::model::caps;
use gpumon::wire::{Decoded, Line, LineSplitter, MAX_MESSAGE_LINE, decode_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, so line breaks fall across reads.
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(k).max(1);
    let mut split = LineSplitter::default();
    let mut lines = Vec::new();
    for part in rest.chunks(chunk) {
        split.feed(part, &mut lines);
        assert!(split.buffered() <= MAX_MESSAGE_LINE);
    }
    let mut model = Companions::default();
    for (i, line) in lines.into_iter().enumerate() {
        let Line::Text(t) = line else { continue };
        if let Ok(Decoded::Msg(m)) = decode_line(&t) {
            let pid = 1 + (i as u32 % 3);
            model.apply(&CompanionFrame {
                t: i as i64,
                pid,
                msg: *m,
            });
            assert!(model.worst_bytes() <= caps::MAX_TOTAL_BYTES);
            for p in model.by_pid.values() {
                assert!(p.devices.len() <= caps::MAX_DEVICES_PER_COMPANION);
            }
        }
    }
});
