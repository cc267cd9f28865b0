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
//! interposer's sources and manifest. There the interposer is built from a copy in OUT_DIR,
//! as a workspace of its own, without its dev-dependencies (they name the monitor by path),
//! pinned by this package's own `Cargo.lock`.
//!
//! Offline and vendored builds (distributions, Nix, docs.rs): the interposer depends only on
//! crates gpumon itself depends on (`tests/it/packaging.rs` checks it), so `cargo vendor`
//! output for gpumon holds everything the nested build needs, at the versions the lock pins.
//! The nested cargo runs in this package's directory with the outer environment, so it sees
//! the same `.cargo/config.toml` source replacement and `CARGO_NET_OFFLINE`; with the lock
//! complete and the crates already on disk it makes no network request either way.
//! `scripts/offline_check.sh` builds the packaged crate so, with an empty CARGO_HOME.
//!
//! docs.rs only documents the crate and never runs it: under `DOCS_RS` the interposer is
//! not built and an empty file is embedded in its place.

use std::path::{Path, PathBuf};
use std::process::Command;

const LIB: &str = "libgpumon_preload.so";

fn main() {
    println!("cargo:rerun-if-env-changed=GPUMON_PRELOAD_SO");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join(LIB);
    if std::env::var_os("DOCS_RS").is_some() {
        std::fs::write(&dest, b"")
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
        println!("cargo:rustc-env=GPUMON_PRELOAD_HASH=0000000000000000");
        return;
    }
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
    // The interposer also compiles the protocol's shared definitions (a link to them).
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
        // The toolchain is not the cause to suspect: the outer cargo already refused a rustc
        // older than `rust-version`, and the nested build uses the same one. Its own error,
        // printed above this, says what failed.
        panic!(
            "building the LD_PRELOAD interposer failed ({status}): the nested `cargo build \
             --manifest-path {}` says why above. It needs no crate that this package's \
             Cargo.lock does not pin, so an offline or vendored build that can build gpumon \
             has all it needs. Set GPUMON_PRELOAD_SO to a prebuilt libgpumon_preload.so to \
             skip this step.",
            manifest.display()
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

/// Lays the packaged interposer out in `dir` and returns its manifest.
fn stage(root: &Path, packaged: &Path, dir: &Path) -> PathBuf {
    sync(&packaged.join("src"), &dir.join("src"));
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
    let manifest = dir.join("Cargo.toml");
    write_if_changed(&manifest, kept.as_bytes());
    // gpumon's own lock: it pins every crate the interposer uses (cargo drops the rest
    // from this copy), so the interposer is built from the versions gpumon was.
    let lock = root.join("Cargo.lock");
    if lock.is_file() {
        write_if_changed(&dir.join("Cargo.lock"), &read(&lock));
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
