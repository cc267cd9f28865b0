//! The published crate holds everything its build reads (`cargo package` must
//! pass). Its verify build takes minutes, so the suite checks what it would trip on from
//! `cargo package --list` (instant, offline): every file `include_str!`/`include_bytes!`
//! name in src/, every file under src/ (the report's page.css once was left out: the
//! packaged crate did not compile), and the interposer's sources (preload-package/src).
//! The full `cargo package` runs in the release workflow (docs/install.md).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files `cargo package` would put in the crate, relative to the root.
fn packaged() -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "--offline",
            "-p",
            "gpumon",
        ])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo package --list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable").flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// `a/b/../c` → `a/c`, relative to the root, with `/`.
fn normal(p: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in p.strip_prefix(root()).expect("under the root").components() {
        match c {
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

/// The literal paths of `include_str!("...")` and `include_bytes!("...")` in a source file.
fn included(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for mac in ["include_str!(\"", "include_bytes!(\""] {
        for (i, _) in text.match_indices(mac) {
            let rest = &text[i + mac.len()..];
            if let Some(end) = rest.find('"') {
                out.push(rest[..end].to_string());
            }
        }
    }
    out
}

#[test]
fn the_crate_holds_every_file_its_build_reads() {
    let listed = packaged();
    let mut src = Vec::new();
    files(&root().join("src"), &mut src);
    let mut missing = Vec::new();
    let mut includes = 0;
    for f in &src {
        let name = normal(f);
        if !listed.contains(&name) {
            missing.push(format!("{name} (under src/)"));
        }
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for inc in included(&text) {
            let target = normal(&f.parent().expect("a directory").join(&inc));
            includes += 1;
            if !listed.contains(&target) {
                missing.push(format!("{target} ({name} includes it)"));
            }
        }
    }
    // The bundled recordings, the companion's modules and the report's stylesheet at least.
    assert!(
        includes >= 20,
        "include_str!/include_bytes! found: {includes}"
    );
    let mut preload = Vec::new();
    files(&root().join("preload/src"), &mut preload);
    for f in &preload {
        let name = normal(f).replacen("preload/src/", "preload-package/src/", 1);
        if !listed.contains(&name) {
            missing.push(format!("{name} (the interposer's source)"));
        }
    }
    for need in [
        "build.rs",
        "Cargo.lock",
        "preload-package/Cargo.toml.in",
        "README.md",
    ] {
        if !listed.contains(need) {
            missing.push(need.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "cargo package would leave out (Cargo.toml `include`):\n{}",
        missing.join("\n")
    );
}

/// `name vX.Y.Z` of every registry crate in a package's graph over the given edge kinds.
fn graph(package: &str, edges: &str) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--locked", "--prefix", "none"])
        .args(["--format", "{p}", "-e", edges, "-p", package])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        // Workspace members are shown with their path; `(*)` marks a repeat.
        .filter(|l| !l.contains(" (/"))
        .map(|l| l.trim_end_matches(" (*)").to_string())
        .collect()
}

/// The packaged crate builds the interposer in a nested cargo (build.rs), and a distribution
/// builds it from `cargo vendor` output, which holds gpumon's own dependency graph only (the
/// interposer is no dependency of gpumon). A crate the interposer uses and gpumon does not
/// is missing there, and the offline build fails, as it once did for cudarc.
/// scripts/offline_check.sh runs that build; this names the crate in a second.
#[test]
fn the_interposer_uses_only_crates_gpumon_itself_builds() {
    let gpumon = graph("gpumon", "normal,build");
    let interposer = graph("gpumon-preload", "normal,build");
    assert!(
        interposer.iter().any(|p| p.starts_with("libc v")),
        "cargo tree read nothing: {interposer:?}"
    );
    let extra: Vec<&String> = interposer.difference(&gpumon).collect();
    assert!(
        extra.is_empty(),
        "the interposer (preload/Cargo.toml) depends on crates gpumon does not, which an \
         offline build from `cargo vendor` output of the packaged crate cannot get: {extra:?}"
    );
}

/// build.rs hands the linker nothing of its own (no arguments, no search paths), so every
/// profile links alike and scripts/install_check.sh's glibc check of a quick debug install
/// holds for a release install too. A release-only link flag once made `cargo install`
/// binaries that refused older systems (packed relocations, a stand-in `libgcc_s`) while
/// the debug builds the suite checked were fine.
#[test]
fn the_build_script_gives_the_linker_nothing_of_its_own() {
    let build = std::fs::read_to_string(root().join("build.rs")).expect("build.rs");
    for directive in [
        "rustc-link-arg",
        "rustc-link-search",
        "rustc-link-lib",
        "rustc-cdylib-link-arg",
    ] {
        assert!(
            !build.contains(directive),
            "build.rs prints cargo:{directive}: check the linked binary in \
             scripts/install_check.sh with the profile that gets it"
        );
    }
}
