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
    let manifest = root.join("preload").join("Cargo.toml");
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
