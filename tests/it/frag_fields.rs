//! The fragmentation fields cross the language boundary: the Python companion's
//! own reduction of a block map (`_frag.reduce_torch_snapshot`, `_frag.Recurrence`) encoded
//! by its own `_proto.encode`, decoded by gpumon's one protocol definition (`wire`) and
//! kept by the model, with nothing lost or renamed.

use std::process::Command;

use gpumon::model::allocator::Companions;
use gpumon::model::frame::CompanionFrame;
use gpumon::wire::{Decoded, Message, decode_line};

const SCRIPT: &str = r#"
import sys
sys.path.insert(0, sys.argv[1])
from gpumon import _frag, _proto
M = 1 << 20
def snap(live):
    blocks = [{"size": 768 * M, "state": "active_allocated"}, {"size": 2 * M, "state": "inactive"}]
    blocks.append({"size": 640 * M, "state": "active_allocated" if live else "inactive"})
    return [{"device": 0, "total_size": 1410 * M, "blocks": blocks}]
rec = _frag.Recurrence()
for live in (True, False, True, False):
    f = _frag.reduce_torch_snapshot(snap(live), 0)
    f["requests"] = rec.update(f.pop("_live_counts"))
f["type"] = "frag"
f["t"] = 1000
sys.stdout.write(_proto.encode(f).decode())
"#;

#[test]
fn python_frag_sizes_and_requests_decode_and_reach_the_model() {
    let py = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let Ok(out) = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&py)
        .output()
    else {
        eprintln!("python3 missing: skipped");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = 1u64 << 20;
    let Ok(Decoded::Msg(msg)) = decode_line(&out.stdout) else {
        panic!("not a message: {}", String::from_utf8_lossy(&out.stdout));
    };
    let Message::Frag(f) = *msg.clone() else {
        panic!("not a frag: {msg:?}");
    };
    assert_eq!(
        f.free_top,
        [640 * m, 2 * m],
        "the buffer freed at the last reading"
    );
    assert_eq!(f.live_top, [768 * m]);
    assert_eq!(
        f.requests,
        [(640 * m, 2)],
        "made anew twice; the parameter never"
    );
    let mut c = Companions::default();
    c.apply(&CompanionFrame {
        t: 1000,
        pid: 7,
        msg: *msg,
    });
    let fr = c
        .get(7)
        .and_then(|p| p.devices.get(&0))
        .and_then(|d| d.frag.clone());
    let fr = fr.expect("kept");
    assert_eq!(
        (fr.free_top, fr.requests),
        (vec![640 * m, 2 * m], vec![(640 * m, 2)])
    );
}
