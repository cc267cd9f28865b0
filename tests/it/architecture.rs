//! The house's floor plan, checked: no import cycle between the files of `src/` or of the
//! interposer's `preload/src/`, and each room imports only the rooms below it (each
//! lib.rs lists them bottom to top; CONTRIBUTING.md draws the roads). The graph is read from the source text (`crate::`
//! and `super::` paths, `use crate::{..}` groups included), so a new upward import fails
//! here with the file and the path that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every room, bottom to top in the order src/lib.rs's map lists them, with the rooms it
/// may import besides itself (each only rooms listed before it; a test checks both).
const BELOW: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("fmt", &[]),
    ("model", &["wire", "fmt"]),
    // What the configuration file sets, as plain values: below every mode that reads them.
    ("settings", &["model", "wire", "fmt"]),
    ("channel", &["model", "wire", "fmt"]),
    ("record", &["model", "wire", "fmt"]),
    // Replay reads recordings; no source knows the terminal.
    ("source", &["model", "wire", "fmt", "record"]),
    ("export", &["model", "wire", "fmt"]),
    // The pipeline does no I/O of its own: no source (what /proc says reaches it as frames,
    // or as a function the runner hands it).
    ("pipeline", &["model", "wire", "fmt", "record", "export"]),
    (
        "tui",
        &[
            "model", "settings", "wire", "fmt", "source", "pipeline", "export",
        ],
    ),
    // A report is a replay through the pipeline, told in the screen's words (`tui::ui::policy`).
    (
        "report",
        &[
            "model", "wire", "fmt", "record", "source", "pipeline", "export", "tui",
        ],
    ),
    // The bundled interposer and demos unpack where the channel looks for sockets.
    ("embed", &["wire", "fmt", "channel"]),
    ("launch", &["wire", "fmt", "model", "channel", "embed"]),
    (
        "cli",
        &[
            "wire", "fmt", "model", "record", "source", "export", "report",
        ],
    ),
    (
        "config",
        // The screen's zoom steps only, to check `window` when the file is read.
        &["wire", "fmt", "model", "settings", "tui", "cli"],
    ),
    (
        "runner",
        &[
            "wire", "fmt", "model", "settings", "channel", "record", "source", "export",
            "pipeline", "tui", "report", "embed", "launch", "cli", "config",
        ],
    ),
];

/// Module path (`model::alerts::engine`) of every `.rs` file under `src/`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).expect("under src").with_extension("");
                let mut parts: Vec<String> = rel
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                if parts.last().is_some_and(|l| l == "mod") {
                    parts.pop();
                }
                if parts == ["main"] || parts == ["lib"] {
                    continue;
                }
                out.insert(parts.join("::"), p);
            }
        }
    }
    out
}

/// The non-test part of a file: each `#[cfg(test)] mod` (a `mod x { .. }` block or a
/// `mod x;` line) is cut out, because tests may reach anywhere. Only those: an item-level
/// `#[cfg(test)]` (an `impl`, a `use`, a helper) is compiled into the crate's unit tests
/// beside production code and is read like it, so an import hidden after one is caught.
fn code(path: &Path) -> String {
    strip_test_mods(&std::fs::read_to_string(path).expect("readable source"))
}

fn strip_test_mods(text: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(ATTR) {
        let after = &rest[i + ATTR.len()..];
        let item = after.trim_start();
        let item = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| item.strip_prefix(v))
            .unwrap_or(item);
        let Some(decl) = item.strip_prefix("mod ") else {
            out.push_str(&rest[..i + ATTR.len()]);
            rest = after;
            continue;
        };
        out.push_str(&rest[..i]);
        let body = decl.find(['{', ';']).unwrap_or(decl.len());
        rest = if decl[body..].starts_with('{') {
            &decl[body + block_len(&decl[body..])..]
        } else {
            &decl[(body + 1).min(decl.len())..]
        };
    }
    out.push_str(rest);
    out
}

/// `r"`, `r#"`: the number of `#` of a raw string's opening (not a raw identifier's `r#x`).
fn raw_hashes(s: &str) -> Option<usize> {
    let n = s.bytes().take_while(|&c| c == b'#').count();
    s[n..].starts_with('"').then_some(n)
}

/// Length of the `{ .. }` block `s` starts with, braces inside strings, chars and
/// comments not counted (a test module's fixtures are full of them).
fn block_len(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut i, mut depth) = (0, 0usize);
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += s[i..].find('\n').unwrap_or(s.len() - i);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += s[i..].find("*/").map_or(s.len() - i, |e| e + 1);
            }
            b'r' if i > 0
                && !b[i - 1].is_ascii_alphanumeric()
                && raw_hashes(&s[i + 1..]).is_some() =>
            {
                let hashes = raw_hashes(&s[i + 1..]).unwrap_or(0);
                let close = format!("\"{}", "#".repeat(hashes));
                let open = i + 2 + hashes;
                i = s[open..]
                    .find(&close)
                    .map_or(s.len(), |e| open + e + close.len())
                    - 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            // A char literal ('{', '\'', '\u{7b}'), not a lifetime ('a).
            b'\'' => {
                if b.get(i + 1) == Some(&b'\\') {
                    i += s[i + 3..].find('\'').map_or(s.len() - i, |e| e + 3);
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 2;
                } else if let Some(c) = s[i + 1..].chars().next()
                    && s[i + 1 + c.len_utf8()..].starts_with('\'')
                {
                    i += c.len_utf8() + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// Every path a file names through `crate::` (groups expanded), as segment lists.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::`, `my_crate::`
        }
        expand(rest, &mut Vec::new(), &mut out);
    }
    out
}

/// Reads `a::b::{c, d::e}` from the start of `s` into `out`, each path prefixed by `prefix`.
fn expand(s: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = prefix.clone();
    let mut i = 0;
    let b = s.as_bytes();
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start {
            segs.push(s[start..i].to_string());
        }
        if s[i..].starts_with("::{") {
            i += 3;
            loop {
                i += s[i..].len() - s[i..].trim_start().len();
                if s[i..].starts_with('}') {
                    return i + 1;
                }
                i += expand(&s[i..], &mut segs.clone(), out);
                i += s[i..].len() - s[i..].trim_start().len();
                if s[i..].starts_with(',') {
                    i += 1;
                } else if s[i..].starts_with('}') {
                    return i + 1;
                } else {
                    return i;
                }
            }
        } else if s[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(segs);
            return i;
        }
    }
}

/// The longest module that `path` starts with.
fn resolve(path: &[String], mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, path) in &mods {
        let text = code(path);
        let mut deps = BTreeSet::new();
        for p in crate_paths(&text) {
            if let Some(t) = resolve(&p, &mods) {
                deps.insert(t);
            }
        }
        // `super::x` from a file names a sibling module (or the parent's item).
        let parent: Vec<String> = m.split("::").map(str::to_string).collect();
        let parent = &parent[..parent.len() - 1];
        for (i, _) in text.match_indices("super::") {
            let mut full = parent.to_vec();
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            full.push(name);
            if let Some(t) = resolve(&full, &mods) {
                deps.insert(t);
            }
        }
        deps.remove(m);
        g.insert(m.clone(), deps);
    }
    g
}

/// Strongly connected components with more than one file (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn room(m: &str) -> &str {
    m.split("::").next().unwrap_or(m)
}

/// Rooms' imports that break the floor plan, as `file -> module`.
fn upward(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (m, deps) in g {
        let Some((_, allowed)) = BELOW.iter().find(|(r, _)| *r == room(m)) else {
            bad.push(format!("{m}: its room is not in the floor plan"));
            continue;
        };
        for d in deps {
            if room(d) != room(m) && !allowed.contains(&room(d)) {
                bad.push(format!("{m} -> {d}"));
            }
        }
    }
    bad
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_cycle_between_files_of_src() {
    let g = graph(&src());
    assert!(g.len() > 50, "read the whole tree: {} files", g.len());
    let c = cycles(&g);
    assert!(c.is_empty(), "import cycles: {c:#?}");
}

#[test]
fn every_room_imports_only_rooms_below_it() {
    let g = graph(&src());
    let bad = upward(&g);
    assert!(bad.is_empty(), "imports against the floor plan: {bad:#?}");
}

fn preload_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("preload/src")
}

/// The rooms of preload/lib.rs's map, in its order (bottom to top).
fn preload_map() -> Vec<String> {
    let lib = std::fs::read_to_string(preload_src().join("lib.rs")).expect("preload lib.rs");
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// Imports between the interposer's rooms that run up its map, as `file -> module`.
fn preload_upward(g: &BTreeMap<String, BTreeSet<String>>, map: &[String]) -> Vec<String> {
    let at = |r: &str| map.iter().position(|m| m == r);
    let mut bad = Vec::new();
    for (m, deps) in g {
        for d in deps {
            let (from, to) = (room(m), room(d));
            match (at(from), at(to)) {
                (Some(a), Some(b)) if b < a || from == to => {}
                (None, _) => bad.push(format!("{m}: its room is not on the map")),
                _ => bad.push(format!("{m} -> {d}")),
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// The interposer is loaded into other programs, where a tangle is costliest to debug: its
/// files import each other in no circle (fork handling once went lifecycle -> reporter ->
/// lifecycle; the slot table and the hooks named each other), and each module imports only
/// modules its lib.rs map lists before it.
#[test]
fn the_interposer_has_no_import_cycle_and_follows_its_map() {
    let g = graph(&preload_src());
    assert!(g.len() > 15, "read the whole interposer: {} files", g.len());
    let c = cycles(&g);
    assert!(c.is_empty(), "import cycles in preload/src: {c:#?}");
    let map = preload_map();
    let rooms: BTreeSet<&str> = g.keys().map(|m| room(m)).collect();
    assert_eq!(
        rooms,
        map.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "preload/src/lib.rs's map names every module of the interposer, and only those"
    );
    let bad = preload_upward(&g, &map);
    assert!(
        bad.is_empty(),
        "imports up preload/src/lib.rs's map: {bad:#?}"
    );
}

/// A drawn frame reaches the terminal through one room: only `tui::output`'s own files name
/// its steps (the cell diff, the size and cursor memory, the escape codes, the filter) or a
/// ratatui backend, and the others ask it for a whole `Terminal`. So a frame never goes up
/// into the runner to be wrapped and down again, and a ratatui or crossterm upgrade has one
/// room to check.
#[test]
fn a_frame_reaches_the_terminal_through_tui_output_alone() {
    let mut bad = Vec::new();
    for (m, deps) in graph(&src()) {
        if m == "tui::output" || m.starts_with("tui::output::") {
            continue;
        }
        for d in deps.iter().filter(|d| d.starts_with("tui::output::")) {
            bad.push(format!("{m} -> {d}"));
        }
    }
    for (m, path) in modules(&src()) {
        if !m.starts_with("tui::output") && code(&path).contains("ratatui::backend") {
            bad.push(format!("{m} names ratatui::backend"));
        }
    }
    assert!(
        bad.is_empty(),
        "terminal output outside tui::output: {bad:#?}"
    );
}

/// The map in lib.rs, the table above and the tree name the same rooms in the same order,
/// and each room's allowance reaches only rooms listed before it: the map's "each imports
/// only rooms listed before it" is then what `every_room_imports_only_rooms_below_it` checks.
#[test]
fn the_lib_map_lists_every_room_in_the_checks_order() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let map: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let table: Vec<&str> = BELOW.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        map, table,
        "lib.rs's map and the check list the rooms in one order"
    );
    let mods = modules(&src());
    let rooms: BTreeSet<&str> = mods.keys().map(|m| room(m)).collect();
    assert_eq!(
        rooms,
        table.iter().copied().collect::<BTreeSet<_>>(),
        "every room of src/ is on the plan, and only those"
    );
    for r in &rooms {
        assert!(lib.contains(&format!("mod {r};")), "lib.rs declares {r}");
    }
    for (i, (r, allowed)) in BELOW.iter().enumerate() {
        for a in *allowed {
            assert!(
                table[..i].contains(a),
                "{r} may import {a}, listed after it"
            );
        }
    }
}

/// The map's own words, checked for every pair of rooms the code connects: no file imports
/// a room that lib.rs lists after its own (whatever the table above allows).
#[test]
fn no_import_runs_up_the_maps_order() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let map: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let at = |r: &str| map.iter().position(|m| *m == r);
    let mut up = BTreeSet::new();
    for (m, deps) in graph(&src()) {
        for d in deps {
            let (from, to) = (room(&m), room(&d));
            match (at(from), at(to)) {
                (Some(a), Some(b)) if b <= a || from == to => {}
                _ => {
                    up.insert(format!("{from} -> {to} ({m} -> {d})"));
                }
            }
        }
    }
    assert!(up.is_empty(), "imports up lib.rs's order: {up:#?}");
}

/// The checks catch what they are for: a made-up tree with a cycle and an upward import.
#[test]
fn the_checks_fail_on_a_bad_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path();
    std::fs::create_dir_all(s.join("model")).expect("mkdir");
    std::fs::write(s.join("model/mod.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(s.join("model/a.rs"), "use super::b::X;\n").expect("write");
    std::fs::write(
        s.join("model/b.rs"),
        "use crate::model::{a::Y, c};\nuse crate::tui::app::App;\n",
    )
    .expect("write");
    std::fs::create_dir_all(s.join("tui")).expect("mkdir");
    std::fs::write(s.join("tui/app.rs"), "pub struct App;\n").expect("write");
    let g = graph(s);
    assert_eq!(
        cycles(&g),
        vec![vec!["model::a".to_string(), "model::b".to_string()]]
    );
    assert_eq!(upward(&g), vec!["model::b -> tui::app".to_string()]);
}

/// An import after an item-level `#[cfg(test)]` is production code to the check (the rest of
/// the file compiles into the product); only a `#[cfg(test)] mod` is cut. The real
/// `model/alerts/oom.rs` has such an item (its `Default` for the rule's tests) before its
/// production code: an upward import planted after it fails the check, one planted in its
/// test module does not.
#[test]
fn an_import_after_an_item_level_cfg_test_is_read() {
    let real = std::fs::read_to_string(src().join("model/alerts/oom.rs")).expect("oom.rs");
    let item = real
        .find("#[cfg(test)]\nimpl")
        .expect("oom.rs still has an item-level #[cfg(test)]");
    let tests = real
        .find("#[cfg(test)]\nmod ")
        .expect("oom.rs has a test module");
    assert!(item < tests);
    let after_item = item + real[item..].find("\n}\n").expect("the item ends") + 3;
    let plant = "use crate::tui::app::App;\n";
    let build = |text: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = dir.path();
        std::fs::create_dir_all(s.join("model/alerts")).expect("mkdir");
        std::fs::create_dir_all(s.join("tui")).expect("mkdir");
        std::fs::write(s.join("model/mod.rs"), "pub mod alerts;\n").expect("write");
        std::fs::write(s.join("model/alerts/mod.rs"), "pub mod oom;\n").expect("write");
        std::fs::write(s.join("model/alerts/oom.rs"), text).expect("write");
        std::fs::write(s.join("tui/app.rs"), "pub struct App;\n").expect("write");
        upward(&graph(s))
    };
    assert_eq!(
        build(&real),
        Vec::<String>::new(),
        "the copy is clean as it is"
    );
    let planted = format!("{}{plant}{}", &real[..after_item], &real[after_item..]);
    assert_eq!(
        build(&planted),
        vec!["model::alerts::oom -> tui::app".to_string()]
    );
    let in_tests = tests + real[tests..].find('{').expect("mod body") + 1;
    let planted = format!("{}\n{plant}{}", &real[..in_tests], &real[in_tests..]);
    assert_eq!(
        build(&planted),
        Vec::<String>::new(),
        "tests may reach anywhere"
    );
}

/// The cut skips a test module whole, braces in its strings, chars and comments included,
/// and keeps what follows it.
#[test]
fn a_test_module_is_cut_whole() {
    let text = r##"use crate::model::A;
#[cfg(test)]
mod tests {
    use crate::tui::X;
    const S: &str = "}}";
    const R: &str = r#"}"#;
    const C: char = '}';
    const Q: char = '\'';
    // }
    /* } */
    fn f<'a>(x: &'a str) -> &'a str { x }
}
#[cfg(test)]
pub(crate) mod helpers;
use crate::export::B;
"##;
    let kept = strip_test_mods(text);
    assert!(!kept.contains("tui") && !kept.contains("helpers"), "{kept}");
    assert!(
        kept.contains("crate::model::A") && kept.contains("crate::export::B"),
        "{kept}"
    );
}
