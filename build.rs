//! Builds the LD_PRELOAD interposer (the `preload/` workspace member) so the gpumon binary can
//! carry it inside (`src/embed.rs`, `include_bytes!`).
//!
//! Why embed rather than look next to the binary: `cargo install` installs binaries only, never
//! a cdylib of another workspace member, and a wheel or a copied binary loses its neighbours
//! too. One file that holds its own matching interposer cannot be installed half-way.
//! Artifact dependencies (`-Z bindeps`) would do this in Cargo itself but are unstable, so the
//! build script runs a nested `cargo build` of the member into its own target directory (the
//! outer target directory is locked by the outer build). The nested build joins the outer
//! jobserver through `CARGO_MAKEFLAGS`, so it never uses more cores than the outer one.
//!
//! `GPUMON_PRELOAD_SO=/path/libgpumon_preload.so` embeds a prebuilt library instead (packagers
//! that build the interposer separately, or a source tree without `preload/`).
//!
//! The published crate has no `preload/` (`cargo package` leaves out a directory that holds a
//! package of its own): it carries `preload-package/`, links in the repository to the
//! interposer's sources, manifest and the workspace's lock. There the interposer is built from
//! a copy in OUT_DIR laid out as the repository is (`preload/src` includes
//! `src/wire/protocol.rs` by a relative path), as a workspace of its own, without its
//! dev-dependencies (they name the monitor by path), pinned by the repository's lock.

use std::path::{Path, PathBuf};
use std::process::Command;

const LIB: &str = "libgpumon_preload.so";

fn main() {
    println!("cargo:rerun-if-env-changed=GPUMON_PRELOAD_SO");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join(LIB);
    if let Some(prebuilt) = std::env::var_os("GPUMON_PRELOAD_SO").filter(|v| !v.is_empty()) {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &dest);
        return;
    }
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let mut manifest = root.join("preload").join("Cargo.toml");
    let packaged = root.join("preload-package");
    if !manifest.is_file() && packaged.join("Cargo.toml.in").is_file() {
        manifest = stage(&root, &packaged, &out.join("preload-stage"));
    }
    if !manifest.is_file() {
        panic!(
            "gpumon embeds its LD_PRELOAD interposer, but {} is missing: build from the full \
             source tree, or set GPUMON_PRELOAD_SO to a built libgpumon_preload.so",
            manifest.display()
        );
    }
    // The interposer also compiles in the protocol's shared definitions (`include!`).
    for p in [
        "preload/src",
        "preload/Cargo.toml",
        "preload-package",
        "Cargo.lock",
        "src/wire/protocol.rs",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
    let target_dir = out.join("preload-target");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--lib", "--target-dir"])
        .arg(&target_dir);
    if release {
        cmd.arg("--release");
    } else {
        // A debug interposer with debug info is ~29 MB, and every debug gpumon would carry it
        // and write it to each fresh cache; without debug info it is a few MB.
        cmd.env("CARGO_PROFILE_DEV_DEBUG", "false")
            .env("CARGO_PROFILE_DEV_STRIP", "debuginfo");
    }
    if target != host {
        cmd.args(["--target", &target]);
    }
    // Clippy and `cargo check` wrap rustc for the outer build only; the interposer must be a
    // real library. The outer `CARGO_TARGET_DIR` would point the nested build at a locked dir.
    // The outer RUSTFLAGS are gpumon's (a fuzzing build instruments everything, build scripts
    // included when no --target is given, and those then fail to link): the interposer is a
    // separate library loaded into other programs and is built plainly; a packager who needs
    // flags for it sets GPUMON_PRELOAD_SO.
    cmd.env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the interposer: {e}"));
    if !status.success() {
        panic!(
            "building the LD_PRELOAD interposer (preload/) failed ({status}); it needs Rust \
             1.88 or newer. Set GPUMON_PRELOAD_SO to a prebuilt library to skip this step."
        );
    }
    let mut built = target_dir;
    if target != host {
        built.push(&target);
    }
    built.push(if release { "release" } else { "debug" });
    built.push(LIB);
    copy(&built, &dest);
}

/// Lays the packaged interposer out in `dir` as in the repository and returns its manifest.
fn stage(root: &Path, packaged: &Path, dir: &Path) -> PathBuf {
    let fail = |what: &Path, e: std::io::Error| -> ! {
        panic!(
            "cannot stage the interposer's sources ({}): {e}",
            what.display()
        )
    };
    sync(&packaged.join("src"), &dir.join("preload/src"));
    let proto = dir.join("src/wire/protocol.rs");
    std::fs::create_dir_all(dir.join("src/wire")).unwrap_or_else(|e| fail(&proto, e));
    write_if_changed(&proto, &read(&root.join("src/wire/protocol.rs")));
    let text = String::from_utf8(read(&packaged.join("Cargo.toml.in")))
        .unwrap_or_else(|e| panic!("preload-package/Cargo.toml.in is not UTF-8: {e}"));
    let mut kept = String::new();
    let mut dev = false;
    for line in text.lines() {
        if line.starts_with('[') {
            dev = line.trim() == "[dev-dependencies]";
        }
        if !dev {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept.push_str("\n# Built by gpumon's build.rs from the packaged sources: a workspace of its own.\n[workspace]\n");
    let manifest = dir.join("preload/Cargo.toml");
    write_if_changed(&manifest, kept.as_bytes());
    let lock = packaged.join("Cargo.lock.in");
    if lock.is_file() {
        write_if_changed(&dir.join("preload/Cargo.lock"), &read(&lock));
    }
    manifest
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Rewrites only what changed, so an unchanged source keeps its time and the nested build
/// stays fresh.
fn write_if_changed(p: &Path, bytes: &[u8]) {
    if std::fs::read(p).is_ok_and(|old| old == bytes) {
        return;
    }
    std::fs::write(p, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
}

fn sync(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
    for e in entries.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            sync(&src, &dst);
        } else {
            write_if_changed(&dst, &read(&src));
        }
    }
}

/// Copy the library into OUT_DIR and publish its content hash, which names the cache
/// directory it is written to at run time (src/embed.rs) without hashing megabytes per start.
fn copy(from: &Path, to: &Path) {
    let bytes = std::fs::read(from)
        .unwrap_or_else(|e| panic!("cannot read the interposer {}: {e}", from.display()));
    std::fs::write(to, &bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", to.display()));
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    println!("cargo:rustc-env=GPUMON_PRELOAD_HASH={h:016x}");
}
