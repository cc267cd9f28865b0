//! The declared minimum Rust version is true for the whole workspace: no dependency that
//! either crate builds (normal and build dependencies, for this platform) declares a newer
//! `rust-version` than the crate does. What this cannot see is a language or library feature
//! newer than the declared version in our own code; docs/install.md says how that was checked.

use std::process::Command;

fn version(v: &str) -> (u64, u64, u64) {
    let mut it = v.split('.').map(|x| x.parse::<u64>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

#[test]
fn rust_version_covers_every_dependency() {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let host = String::from_utf8(
        Command::new("rustc")
            .arg("-vV")
            .output()
            .expect("rustc -vV")
            .stdout,
    )
    .expect("utf-8");
    let host = host
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("host triple")
        .to_string();
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata json");
    let packages = m["packages"].as_array().expect("packages");
    let by_id = |id: &str| packages.iter().find(|p| p["id"] == id).expect("package");
    let nodes = m["resolve"]["nodes"].as_array().expect("resolve");
    let deps_of = |id: &str| -> Vec<String> {
        let node = nodes.iter().find(|n| n["id"] == id).expect("node");
        node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k["kind"] != "dev"))
            })
            .map(|d| d["pkg"].as_str().expect("id").to_string())
            .collect()
    };
    for member in ["gpumon", "gpumon-preload"] {
        let root = packages
            .iter()
            .find(|p| p["name"] == member)
            .expect("member");
        let declared = root["rust_version"].as_str().expect("rust-version is set");
        let mut stack = vec![root["id"].as_str().expect("id").to_string()];
        let mut seen = std::collections::BTreeSet::new();
        let mut needs = Vec::new();
        while let Some(id) = stack.pop() {
            for d in deps_of(&id) {
                if seen.insert(d.clone()) {
                    let p = by_id(&d);
                    if let Some(rv) = p["rust_version"].as_str()
                        && version(rv) > version(declared)
                    {
                        needs.push(format!("{} {} needs {rv}", p["name"], p["version"]));
                    }
                    stack.push(d);
                }
            }
        }
        assert!(
            needs.is_empty(),
            "{member} declares rust-version {declared}, but {needs:?}"
        );
    }
}
