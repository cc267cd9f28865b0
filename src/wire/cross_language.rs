//! One protocol, three implementations: the monitor (this module), the native interposer
//! (`preload/`, whose `protocol` module is a link to `protocol.rs`) and the Python companion
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
    // A link, not a copy: the interposer's package stores the file itself (`cargo package`
    // follows links), and nothing outside its directory is read when it builds.
    let link = root().join("preload/src/protocol.rs");
    let meta = fs::symlink_metadata(&link).expect("preload/src/protocol.rs exists");
    assert!(
        meta.file_type().is_symlink(),
        "preload/src/protocol.rs must be a link to src/wire/protocol.rs, not a copy"
    );
    assert_eq!(
        fs::canonicalize(&link).expect("the link resolves"),
        fs::canonicalize(root().join("src/wire/protocol.rs")).expect("protocol.rs exists")
    );
    let lib = &files
        .iter()
        .find(|(path, _)| path == "preload/src/lib.rs")
        .expect("preload/src/lib.rs")
        .1;
    assert!(
        lib.lines().any(|l| l.trim() == "pub mod protocol;"),
        "the interposer must compile the link as its `protocol` module"
    );
    let files: Vec<&(String, String)> = files
        .iter()
        .filter(|(path, _)| path != "preload/src/protocol.rs")
        .collect();
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

/// The fields serde reads for `T`, asked of its derived `Deserialize` (the names as they
/// are on the wire, renames included).
fn wire_fields<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    struct Ask(Option<&'static [&'static str]>);
    impl<'de> serde::Deserializer<'de> for &mut Ask {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("only the field list is asked for"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(serde::de::Error::custom("only the field list is asked for"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut ask = Ask(None);
    let _ = T::deserialize(&mut ask);
    ask.0.expect("a struct with named fields")
}

/// The monitor's field names of the message `type`.
fn fields_of(kind: &str) -> &'static [&'static str] {
    use super::*;
    match kind {
        "hello" => wire_fields::<Hello>(),
        "sample" => wire_fields::<Sample>(),
        "frag" => wire_fields::<Frag>(),
        "epoch" => wire_fields::<EpochRecord>(),
        "marker" => wire_fields::<Marker>(),
        "event" => wire_fields::<FrameworkEvent>(),
        "history" => wire_fields::<History>(),
        "alloc" => wire_fields::<AllocBatch>(),
        "bye" => wire_fields::<Bye>(),
        "error" => wire_fields::<ErrorMsg>(),
        other => panic!("no field list for type {other:?}: add it here"),
    }
}

/// A message built in a source: its `type`, the keys it is given (in its literal, and
/// assigned to the name it is bound to afterwards: `s["t"] = ..`), and where.
#[derive(Debug)]
struct Built {
    kind: String,
    keys: Vec<String>,
    at: String,
}

/// The top-level `"key":` names of the `{ .. }` literal at the start of `s`, and its length
/// (`rust`: `//` comments and no `'` strings, which would be lifetimes; else Python's).
fn literal_keys(s: &str, rust: bool) -> (Vec<String>, usize) {
    let b = s.as_bytes();
    let (mut depth, mut i, mut keys) = (0usize, 0usize, Vec::new());
    let mut expect_key = false;
    while i < b.len() {
        match b[i] {
            b'{' | b'[' | b'(' => {
                depth += 1;
                expect_key = depth == 1 && b[i] == b'{';
            }
            b'}' | b']' | b')' => {
                depth -= 1;
                if depth == 0 {
                    return (keys, i + 1);
                }
            }
            b',' if depth == 1 => expect_key = true,
            b'#' if !rust => i += s[i..].find('\n').unwrap_or(s.len() - i),
            b'/' if rust && b.get(i + 1) == Some(&b'/') => {
                i += s[i..].find('\n').unwrap_or(s.len() - i);
            }
            q @ (b'"' | b'\'') if q == b'"' || !rust => {
                let end = i + 1 + s[i + 1..].find(q as char).unwrap_or(s.len() - i - 1);
                let after = s[end + 1..].trim_start();
                if expect_key && depth == 1 && after.starts_with(':') {
                    keys.push(s[i + 1..end].to_string());
                }
                expect_key = false;
                i = end;
            }
            c if !c.is_ascii_whitespace() => expect_key = false,
            _ => {}
        }
        i += 1;
    }
    (keys, s.len())
}

fn built(files: &[(String, String)], rust: bool) -> Vec<Built> {
    let mut out = Vec::new();
    for (path, text) in files {
        let text = if rust { without_tests(text) } else { text };
        for (open, _) in text.match_indices('{') {
            let (keys, len) = literal_keys(&text[open..], rust);
            let Some(ti) = text[open..open + len].find("\"type\"") else {
                continue;
            };
            if !keys.iter().any(|k| k == "type") {
                continue;
            }
            let kind = text[open + ti + 6..]
                .trim_start()
                .strip_prefix(':')
                .and_then(|v| v.trim_start().strip_prefix('"'))
                .and_then(|v| v.split_once('"'))
                .map(|(k, _)| k.to_string());
            let Some(kind) = kind else { continue };
            let line_start = text[..open].rfind('\n').map_or(0, |n| n + 1);
            let head = text[line_start..open].trim();
            let head = head.strip_suffix("json!(").unwrap_or(head).trim_end();
            let name = head
                .strip_suffix('=')
                .map(|h| {
                    h.trim()
                        .trim_start_matches("let ")
                        .trim_start_matches("mut ")
                })
                .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'));
            let mut keys = keys;
            if let Some(name) = name.filter(|n| !n.is_empty()) {
                let set = format!("{name}[\"");
                for line in text[open + len..].lines() {
                    let l = line.trim_start();
                    if l.starts_with("def ") || l.starts_with("fn ") || l.starts_with("pub fn ") {
                        break;
                    }
                    if l.starts_with(&format!("{name} =")) {
                        break;
                    }
                    if let Some(rest) = l.strip_prefix(&set)
                        && let Some((key, tail)) = rest.split_once("\"]")
                        && tail.trim_start().starts_with('=')
                        && !tail.trim_start().starts_with("==")
                    {
                        keys.push(key.to_string());
                    }
                }
            }
            let line = text[..open].lines().count();
            out.push(Built {
                kind,
                keys,
                at: format!("{path}:{line}"),
            });
        }
    }
    out
}

/// Field names cross the boundary too: a key a companion sends under a name the monitor's
/// struct does not have is dropped without a word (unknown fields are ignored, for newer
/// peers), so a misspelt or renamed field would read as "not reported". Every key Python
/// and the interposer put into a message is a field of its `wire` type, or listed below
/// with the reason the monitor does not read it.
#[test]
fn every_field_a_peer_sends_is_one_the_monitor_reads() {
    // The envelope, read by the decoder before the message's own fields.
    const ENVELOPE: &[&str] = &["type", "v"];
    // Sent for people reading a trace or a recording by hand; the monitor keeps no use for
    // them (yet): listed so that adding one to a sender is a decision here.
    const NOT_READ: &[(&str, &str)] = &[
        ("history", "done"),
        ("alloc", "snapshot"),
        ("sample", "live_count"),
        ("sample", "pool_reserved"),
        ("sample", "pool_reserved_high"),
        ("sample", "host_pinned"),
        ("sample", "host_pinned_peak"),
        ("sample", "host_pinned_count"),
    ];
    let mut all = built(&python(), false);
    all.extend(built(&interposer(), true));
    let kinds: BTreeSet<&str> = all.iter().map(|b| b.kind.as_str()).collect();
    assert!(
        kinds.len() >= 8,
        "the scan finds the senders' messages: {kinds:?}"
    );
    let mut unknown = Vec::new();
    for b in &all {
        if !PEER_TYPES.contains(&b.kind.as_str()) {
            continue; // the monitor's hello, answered by the other check
        }
        let fields = fields_of(&b.kind);
        for k in &b.keys {
            let known = ENVELOPE.contains(&k.as_str())
                || fields.contains(&k.as_str())
                || NOT_READ.contains(&(b.kind.as_str(), k.as_str()));
            if !known {
                unknown.push(format!("{}: {} field {k:?}", b.at, b.kind));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "fields the monitor's wire types do not have (src/wire/messages.rs): {unknown:#?}"
    );
    let stale: Vec<_> = NOT_READ
        .iter()
        .filter(|(kind, key)| {
            !all.iter()
                .any(|b| b.kind == *kind && b.keys.iter().any(|k| k == key))
        })
        .collect();
    assert!(
        stale.is_empty(),
        "no sender sends these any more: {stale:?}"
    );
}

/// The scan sees keys in a literal and keys assigned to its name later, and a misspelt one
/// is caught.
#[test]
fn the_field_scan_reads_literals_and_later_keys() {
    let py = r#"
def f():
    s = {"type": "sample", "dev": 0,
         "allocated": a["current"], "na": {"x": "y"}}
    if s:
        s["t"] = 5
        s["reserve"] = 1
    other = {"k": 1}
def g():
    s["peak"] = 1
"#;
    let b = built(&[("x.py".into(), py.into())], false);
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(b[0].kind, "sample");
    assert_eq!(
        b[0].keys,
        ["type", "dev", "allocated", "na", "t", "reserve"]
    );
    let fields = fields_of("sample");
    assert!(fields.contains(&"allocated") && !fields.contains(&"reserve"));
}
