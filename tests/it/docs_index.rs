//! The documentation's indexes cannot go stale: docs/README.md links every page of docs/,
//! docs/measurements/README.md every run folder, and every relative link in either points
//! at something that exists.

use std::path::Path;

fn docs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

/// The targets of `](target)` links in Markdown text, without a `#fragment`.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split('#').next().unwrap_or(t).to_string())
        .filter(|t| !t.is_empty() && !t.contains("://"))
        .collect()
}

fn check(index: &Path, names: &[String]) {
    let text = std::fs::read_to_string(index).expect("the index exists");
    let dir = index.parent().expect("a folder");
    let targets = links(&text);
    for t in &targets {
        assert!(
            dir.join(t).exists(),
            "{} links to {t}, which does not exist",
            index.display()
        );
    }
    for n in names {
        assert!(
            targets
                .iter()
                .any(|t| t.trim_end_matches('/').split('/').next() == Some(n.as_str())),
            "{} does not link {n}",
            index.display()
        );
    }
}

#[test]
fn the_docs_index_links_every_page() {
    let mut pages = Vec::new();
    for e in std::fs::read_dir(docs()).expect("docs/").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let listed = name.ends_with(".md") || name.ends_with(".json") || name == "measurements";
        if listed && name != "README.md" {
            pages.push(name);
        }
    }
    assert!(pages.len() > 10, "read docs/: {pages:?}");
    check(&docs().join("README.md"), &pages);
}

#[test]
fn the_measurements_index_links_every_run() {
    let dir = docs().join("measurements");
    let mut runs = Vec::new();
    for e in std::fs::read_dir(&dir)
        .expect("docs/measurements/")
        .flatten()
    {
        if e.path().is_dir() {
            runs.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    assert!(runs.len() > 10, "read docs/measurements/: {runs:?}");
    check(&dir.join("README.md"), &runs);
}

/// CONTRIBUTING.md's "What a change meets" names every module of this test binary, so a
/// change's author finds every test it can trip, not only the ones near it.
#[test]
fn contributing_names_every_test_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let main = std::fs::read_to_string(root.join("tests/it/main.rs")).expect("main.rs");
    let contributing = std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("CONTRIBUTING");
    let modules: Vec<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|m| *m != "support")
        .collect();
    assert!(modules.len() > 50, "read tests/it/main.rs: {modules:?}");
    let missing: Vec<&&str> = modules
        .iter()
        .filter(|m| !contributing.contains(&format!("`{m}::`")))
        .collect();
    assert!(
        missing.is_empty(),
        "CONTRIBUTING.md (\"What a change meets\") does not name {missing:?}"
    );
}

/// README's test command says what it needs from outside: the registries, and each tool whose
/// tests skip without it unless its `GPUMON_REQUIRE_*` variable is set.
#[test]
fn readme_names_what_the_suite_needs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let intro = readme.split("\n**").next().expect("intro");
    for need in ["crates.io", "PyPI"] {
        assert!(
            intro.contains(need),
            "README's test command does not say it needs {need}"
        );
    }
    let mut used = std::collections::BTreeSet::new();
    let mut stack = vec![root.join("tests/it")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("tests/it").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source");
                for (i, _) in text.match_indices("GPUMON_REQUIRE_") {
                    let name: String = text[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    if name.len() > "GPUMON_REQUIRE_".len() {
                        used.insert(name);
                    }
                }
            }
        }
    }
    assert!(used.len() >= 5, "read tests/it: {used:?}");
    for name in used {
        assert!(
            intro.contains(&format!("`{name}`")),
            "README does not name {name}"
        );
    }
}
