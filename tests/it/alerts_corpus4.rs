//! The alert engine on the foresight corpus (scripts/gpu/corpus4): working sets that grow
//! under a cap, transient requests served from their own hole (eaten, or surviving with no
//! margin), trendless floors over a thousand epochs, servers without epochs, marked leaks;
//! and on the development corpus the team was given (`tests/corpus_dev`, all tuning).
//!
//!     cargo test --test it alerts_corpus4:: -- --nocapture

use std::path::Path;

use crate::alerts_corpus2::{Res, labels_hold};

#[test]
fn corpus4_labels_hold_on_both_halves() -> Res<()> {
    labels_hold(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus4"),
        "labels4.json",
    )
}

#[test]
fn corpus_dev_labels_hold() -> Res<()> {
    labels_hold(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_dev"),
        "labels_dev.json",
    )
}

/// The batch recorded after the rules were tuned: every run held out.
#[test]
fn corpus5_heldout_labels_hold() -> Res<()> {
    labels_hold(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus5"),
        "labels5.json",
    )
}
