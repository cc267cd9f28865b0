//! README's `## Keys` section is generated from the key table (`keys::markdown_table`):
//! this fails when they differ. `GPUMON_BLESS=1 cargo test --test it readme_keys::` rewrites it.

use std::path::Path;

/// The README text between `## Keys` and the next `## ` heading.
fn section(readme: &str) -> Option<(usize, usize)> {
    let start = readme.find("## Keys\n")? + "## Keys\n".len();
    let end = readme[start..]
        .find("\n## ")
        .map_or(readme.len(), |i| start + i + 1);
    Some((start, end))
}

#[test]
fn readme_keys_section_is_the_generated_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (start, end) = section(&readme).expect("README has a `## Keys` section");
    let want = format!("\n{}\n", gpumon::tui::keys::markdown_table());
    if std::env::var_os("GPUMON_BLESS").is_some() {
        let new = format!("{}{want}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, new).expect("write README.md");
        return;
    }
    assert_eq!(
        &readme[start..end],
        want,
        "README's keys differ from src/keys.rs: run GPUMON_BLESS=1 cargo test --test it readme_keys::"
    );
}

#[test]
fn every_binding_is_in_the_generated_table() {
    let table = gpumon::tui::keys::markdown_table();
    for b in gpumon::tui::keys::listed() {
        assert!(table.contains(b.desc), "{} missing", b.desc);
        let first = b.label.split(' ').next().unwrap_or("");
        assert!(table.contains(&format!("`{first}`")), "{first} missing");
    }
}
