//! A recording file: the reader must name a line or read on, never panic, and
//! the model fed from it must keep its bounds.
#![no_main]

use std::io::Write;

use gpumon::model::state::State;
use gpumon::record::{Next, Reader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("gpumon-fuzz-{}.jsonl", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).expect("temp file");
        f.write_all(data).expect("write");
    }
    let Ok(mut r) = Reader::open(&path) else {
        return;
    };
    let mut state = State::default();
    state.apply(&gpumon::model::frame::Frame::Header(r.header.clone()));
    for _ in 0..10_000 {
        match r.next() {
            Ok(Next::Frame(f)) => state.apply(&f),
            Ok(Next::End { .. }) | Err(_) => break,
        }
    }
    assert!(state.companions.by_pid.len() <= gpumon::model::allocator::MAX_COMPANIONS);
});
