//! The house's floor plan, checked: no import cycle between the files of `src/`, and each
//! room imports only the rooms below it (src/lib.rs lists them bottom to top;
//! CONTRIBUTING.md draws the roads). The graph is read from the source text (`crate::`
//! and `super::` paths, `use crate::{..}` groups included), so a new upward import fails
//! here with the file and the path that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each room and the rooms it may import (besides itself). Rooms not listed (`runner`,
/// `cli`, `config`, `launch`, `embed`) are the top floor and may import anything.
const BELOW: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("fmt", &[]),
    ("model", &["wire", "fmt"]),
    ("channel", &["model", "wire", "fmt"]),
    ("record", &["model", "wire", "fmt"]),
    // Replay reads recordings; no source knows the terminal.
    ("source", &["model", "wire", "fmt", "record"]),
    ("export", &["model", "wire", "fmt"]),
    (
        "pipeline",
        &["model", "wire", "fmt", "record", "export", "source"],
    ),
    (
        "tui",
        &["model", "wire", "fmt", "source", "pipeline", "export"],
    ),
    // A report is a replay through the pipeline, told in the screen's words (`tui::ui::policy`).
    (
        "report",
        &[
            "model", "wire", "fmt", "record", "source", "pipeline", "export", "tui",
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

/// The non-test part of a file: tests sit at the bottom, after `#[cfg(test)]`, and may
/// reach anywhere.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source");
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
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

#[test]
fn the_lib_map_lists_every_room() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let mods = modules(&src());
    let rooms: BTreeSet<&str> = mods.keys().map(|m| room(m)).collect();
    for r in rooms {
        assert!(lib.contains(&format!("mod {r};")), "lib.rs declares {r}");
        assert!(lib.contains(&format!("`{r}`")), "lib.rs's map names {r}");
    }
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
