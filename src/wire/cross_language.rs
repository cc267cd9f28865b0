//! One protocol, three implementations: the monitor (this module), the native interposer
//! (`preload/`, which compiles `protocol.rs` in through `include!`) and the Python companion
//! (`python/gpumon`, which cannot, so its copies are checked here). These tests read the
//! other two from the source tree and fail when they drift from `protocol.rs`:
//!
//! - Python's `PROTOCOL_VERSION` and `MAX_LINE` (`_proto.py`, their only definition) equal
//!   [`VERSION`] and [`MAX_MESSAGE_LINE`];
//! - every `type` that Python or the interposer sends is one the monitor accepts
//!   ([`PEER_TYPES`]), and every accepted type has a sender;
//! - the type Python's handshake check demands is the type of [`monitor_hello`];
//! - the interposer takes its constants from `protocol.rs` and defines none of its own;
//! - `src/wire` uses nothing from the rest of the crate.
//!
//! The interposer's acceptance of [`monitor_hello`] is checked at run time by its own tests
//! (`preload/src/reporter/messages.rs`), which link the monitor's `wire` module.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{LOCAL_TYPES, MAX_MESSAGE_LINE, PEER_TYPES, VERSION, monitor_hello};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `(path relative to the root, text)` of every file under `dir` ending in `ext`, sorted.
fn sources(dir: &str, ext: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|x| x == ext) {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&root().join(dir), ext, &mut paths);
    paths.sort();
    assert!(!paths.is_empty(), "no .{ext} files under {dir}");
    paths
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let rel = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
            (rel, text)
        })
        .collect()
}

/// A Rust file without its `#[cfg(test)] mod tests` (test inputs are not what a side sends).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod ").map_or(text, |i| &text[..i])
}

/// Top-level Python assignments `NAME = <integer literal>`.
fn python_ints(text: &str, name: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix('='))
        .filter_map(|v| v.split('#').next()?.trim().replace('_', "").parse().ok())
        .collect()
}

/// Message types named in a source next to the key `"type"`.
#[derive(Debug, Default)]
struct TypeUse {
    /// `"type": "x"` (a Python dict, `json!`) and `["type"] = "x"`: messages built.
    sent: BTreeSet<String>,
    /// `.get("type") == "x"`, `["type"] != "x"`: messages inspected.
    compared: BTreeSet<String>,
    /// `"type": <not a string literal>`: a type this check cannot see.
    dynamic: Vec<String>,
}

fn type_use(files: &[(String, String)], rust: bool) -> TypeUse {
    let mut out = TypeUse::default();
    for (path, text) in files {
        let text = if rust { without_tests(text) } else { text };
        for (i, _) in text.match_indices("\"type\"") {
            let rest = text[i + "\"type\"".len()..].trim_start();
            let (value, sent) = if let Some(v) = rest.strip_prefix(':') {
                (v, true)
            } else if let Some(v) = rest.strip_prefix(']').or_else(|| rest.strip_prefix(')')) {
                let v = v.trim_start();
                match v.strip_prefix("==").or_else(|| v.strip_prefix("!=")) {
                    Some(v) => (v, false),
                    None => match v.strip_prefix('=') {
                        Some(v) => (v, true),
                        None => continue,
                    },
                }
            } else {
                continue;
            };
            let literal = value
                .trim_start()
                .strip_prefix('"')
                .and_then(|v| v.split_once('"'))
                .map(|(name, _)| name.to_string());
            match (literal, sent) {
                (Some(name), true) => {
                    out.sent.insert(name);
                }
                (Some(name), false) => {
                    out.compared.insert(name);
                }
                (None, _) => {
                    let line = text[..i].lines().count();
                    out.dynamic.push(format!("{path}:{line}"));
                }
            }
        }
    }
    out
}

fn peer_types() -> BTreeSet<String> {
    PEER_TYPES.iter().map(|t| t.to_string()).collect()
}

fn python() -> Vec<(String, String)> {
    sources("python/gpumon", "py")
}

fn interposer() -> Vec<(String, String)> {
    sources("preload/src", "rs")
}

#[test]
fn python_constants_match_the_monitor() {
    let files = python();
    for (name, want) in [
        ("PROTOCOL_VERSION", u64::from(VERSION)),
        ("MAX_LINE", MAX_MESSAGE_LINE as u64),
    ] {
        let defs: Vec<(&str, u64)> = files
            .iter()
            .flat_map(|(path, text)| {
                python_ints(text, name)
                    .into_iter()
                    .map(|v| (path.as_str(), v))
            })
            .collect();
        assert_eq!(
            defs,
            [("python/gpumon/_proto.py", want)],
            "Python's {name} must be defined once, in _proto.py, as {want} (src/wire/protocol.rs)"
        );
    }
}

#[test]
fn every_type_a_peer_sends_is_one_the_monitor_accepts() {
    let py = type_use(&python(), false);
    let native = type_use(&interposer(), true);
    for (side, uses) in [("python/gpumon", &py), ("preload/src", &native)] {
        assert!(
            uses.dynamic.is_empty(),
            "{side}: a message type that is not a literal cannot be checked: {:?}",
            uses.dynamic
        );
        let unknown: Vec<_> = uses
            .sent
            .union(&uses.compared)
            .filter(|t| !PEER_TYPES.contains(&t.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "{side} uses types the monitor does not accept from a peer: {unknown:?}; \
             PEER_TYPES = {PEER_TYPES:?}, gpumon-internal: {LOCAL_TYPES:?}"
        );
    }
    let sent: BTreeSet<String> = py.sent.union(&native.sent).cloned().collect();
    assert_eq!(
        sent,
        peer_types(),
        "every type the monitor accepts should have a sender (Python: {:?}, interposer: {:?})",
        py.sent,
        native.sent
    );
}

#[test]
fn python_accepts_the_monitors_hello() {
    let hello: serde_json::Value =
        serde_json::from_str(monitor_hello().trim_end()).expect("the monitor's hello is JSON");
    assert_eq!(hello["v"], VERSION);
    assert_eq!(hello["min_v"], VERSION);
    assert_eq!(hello["max_v"], VERSION);
    let proto: Vec<_> = python()
        .into_iter()
        .filter(|(path, _)| path.ends_with("_proto.py"))
        .collect();
    let demanded = type_use(&proto, false).compared;
    assert_eq!(
        demanded,
        BTreeSet::from([hello["type"].as_str().expect("a type").to_string()]),
        "python/gpumon/_proto.py check_monitor_hello must demand the type of wire::monitor_hello"
    );
}

#[test]
fn the_interposer_takes_its_constants_from_protocol_rs() {
    let files = interposer();
    let include = "include!(\"../../src/wire/protocol.rs\");";
    let including: Vec<&str> = files
        .iter()
        .filter(|(_, text)| text.contains(include))
        .map(|(path, _)| path.as_str())
        .collect();
    assert_eq!(including, ["preload/src/protocol.rs"]);
    let included = root()
        .join("preload/src")
        .join("../../src/wire/protocol.rs");
    assert_eq!(
        fs::canonicalize(included).expect("the included file exists"),
        fs::canonicalize(root().join("src/wire/protocol.rs")).expect("protocol.rs exists")
    );
    let own: Vec<String> = files
        .iter()
        .flat_map(|(path, text)| {
            text.lines().enumerate().filter_map(move |(n, line)| {
                let line = line.trim_start();
                let line = line.strip_prefix("pub ").unwrap_or(line);
                let name = line.strip_prefix("const ")?.split(':').next()?.trim();
                [
                    "VERSION",
                    "MAX_LINE",
                    "MAX_MESSAGE_LINE",
                    "MAX_BUCKET",
                    "PEER_TYPES",
                    "LOCAL_TYPES",
                ]
                .contains(&name)
                .then(|| format!("{path}:{}: {name}", n + 1))
            })
        })
        .collect();
    assert!(
        own.is_empty(),
        "the interposer defines protocol constants itself: {own:?}"
    );
}

#[test]
fn wire_uses_nothing_else_from_the_crate() {
    let needle = concat!("crate", "::");
    let uses: Vec<String> = sources("src/wire", "rs")
        .into_iter()
        .filter(|(_, text)| text.contains(needle))
        .map(|(path, _)| path)
        .collect();
    assert!(
        uses.is_empty(),
        "src/wire must stay the bottom layer: {uses:?}"
    );
}
