//! The alert engine on the third H200 corpus: runs built by mechanism — the two
//! fragmentation mechanisms that end in an OOM with the cache mostly free (a recurring
//! request that fits only its own freed hole under a cap; kept tensors pinning cached holes one by one), slow leaks of
//! 1-4 MiB per epoch, leaks from epoch 0, batch-size schedules, and expandable segments
//! under the same caps — one `gpumon record` of 17 runs, labels in
//! `tests/corpus3/labels3.json`, ground truth the runs wrote themselves (`truth3.jsonl`).
//!
//!     cargo test --test it alerts_corpus3:: -- --nocapture

use std::path::Path;

use crate::alerts_corpus2::{Res, labels_hold};

#[test]
fn corpus3_labels_hold_on_both_halves() -> Res<()> {
    labels_hold(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus3"),
        "labels3.json",
    )
}
