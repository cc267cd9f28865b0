//! scripts/wheel_glibc.py, the release wheel's glibc check, catches what it is for: wheels
//! are made here from this build's binary (linked against this machine's glibc, with the
//! interposer embedded), so the script must see the interposer inside it, refuse a glibc
//! floor both exceed, refuse a tag that is not manylinux, refuse a binary with nothing
//! embedded, and refuse files built for another architecture than the tags name.
//! (scripts/wheel_check.sh runs it on the real manylinux2014 wheels, x86-64 and aarch64.)

use std::path::Path;
use std::process::{Command, Output};

fn python() -> Option<&'static str> {
    Command::new("python3")
        .arg("--version")
        .output()
        .ok()
        .map(|_| "python3")
}

/// A wheel holding `binary` as its script, with the platform tag `tag`.
fn wheel(dir: &Path, binary: &Path, tag: &str) -> std::path::PathBuf {
    let path = dir.join(format!("gpumon_memory-0.1.0-py3-none-{tag}.whl"));
    let status = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1], 'w')\n\
             z.writestr('gpumon_memory-0.1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nTag: py3-none-' + sys.argv[3] + '\\n')\n\
             z.write(sys.argv[2], 'gpumon_memory-0.1.0.data/scripts/gpumon')\n",
        ])
        .arg(&path)
        .arg(binary)
        .arg(tag)
        .status()
        .expect("python3 runs");
    assert!(status.success());
    path
}

fn check(wheel: &Path, max: &str) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/wheel_glibc.py"))
        .arg(wheel)
        .args(["--max-glibc", max])
        .output()
        .expect("python3 runs")
}

#[test]
fn the_glibc_check_reads_the_embedded_interposer_and_the_tags() {
    if python().is_none() {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let gpumon = Path::new(env!("CARGO_BIN_EXE_gpumon"));
    let good = wheel(dir.path(), gpumon, "manylinux_2_17_x86_64");

    let out = check(&good, "99.0");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("(embedded)"),
        "the interposer inside the binary is read: {said}"
    );

    // Every glibc symbol version is above 2.0: both the binary and the interposer fail.
    let out = check(&good, "2.0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("scripts/gpumon needs GLIBC_"), "{err}");
    assert!(err.contains("(embedded) needs GLIBC_"), "{err}");

    let host = wheel(dir.path(), gpumon, "linux_x86_64");
    let out = check(&host, "99.0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("linux_x86_64 is not manylinux"),
        "{err}"
    );

    let newer = wheel(dir.path(), gpumon, "manylinux_2_34_x86_64");
    let out = check(&newer, "2.17");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("manylinux_2_34_x86_64 asks for more than glibc 2.17"),
        "{err}"
    );

    // This machine's binary and interposer in a wheel that names the other architecture.
    let (ours, other) = match std::env::consts::ARCH {
        "aarch64" => ("aarch64", "x86_64"),
        _ => ("x86_64", "aarch64"),
    };
    let foreign = wheel(dir.path(), gpumon, &format!("manylinux_2_17_{other}"));
    let out = check(&foreign, "99.0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("scripts/gpumon is built for {ours}, not {other}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("(embedded) is built for {ours}, not {other}")),
        "{err}"
    );

    // A binary with nothing inside: the check must not pass by reading nothing.
    let bare = wheel(dir.path(), Path::new("/bin/true"), "manylinux_2_17_x86_64");
    let out = check(&bare, "99.0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no embedded ELF"),
        "{err}"
    );
}

fn check_elf(binary: &Path, baseline: Option<&Path>, flags: &[&str]) -> Output {
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/wheel_glibc.py"))
        .args(flags)
        .arg("--elf")
        .arg(binary);
    if let Some(b) = baseline {
        cmd.arg("--baseline").arg(b);
    }
    cmd.output().expect("python3 runs")
}

/// `source` compiled by cc into `dir/name` with `flags`; `None` when cc refuses them.
fn cc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<std::path::PathBuf> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write");
    let exe = dir.join(name);
    let built = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .status()
        .expect("cc runs");
    built.success().then_some(exe)
}

fn have_python_and_cc() -> bool {
    let ok = python().is_some() && Command::new("cc").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: no python3 or no cc");
    }
    ok
}

/// The installed binary's check (scripts/install_check.sh): this build passes against a
/// plain program linked here, and a program with packed relocations (what build.rs once
/// made of `cargo install`) is refused, by its dynamic section and by the loader feature
/// the linker made it require.
#[test]
fn the_binary_check_passes_this_build_and_refuses_packed_relocations() {
    if !have_python_and_cc() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let gpumon = Path::new(env!("CARGO_BIN_EXE_gpumon"));
    // This build is the suite's: the dev-dependencies turn on tokio's multi-thread
    // scheduler, whose statistics call powf, so it may name libm (the next test shows the
    // check refuses libm without that allowance).
    let out = check_elf(gpumon, Some(gpumon), &["--allow-libm"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let Some(relr) = cc(
        dir.path(),
        "relr",
        "static const char *p[] = {\"a\", \"b\", \"c\"};\nint main(int c, char **v) { return p[c][0]; }\n",
        &["-pie", "-fPIE", "-Wl,-z,pack-relative-relocs"],
    ) else {
        eprintln!("skipped: this linker cannot pack relocations, so it cannot make them either");
        return;
    };
    let out = check_elf(&relr, Some(&relr), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("has packed relocations (DT_RELR)"), "{err}");
    assert!(err.contains("needs GLIBC_ABI_DT_RELR"), "{err}");
}

/// A program that links the system libm (a call of pow) is refused, and passes only with
/// `--allow-libm`, the suite's own allowance.
#[test]
fn the_binary_check_refuses_the_system_libm() {
    if !have_python_and_cc() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pow = cc(
        dir.path(),
        "pow",
        "#include <math.h>\nint main(int c, char **v) { return (int)pow(c + 0.5, v[0][0]); }\n",
        &["-Wl,--no-as-needed", "-lm"],
    )
    .expect("cc links a program with libm");
    let out = check_elf(&pow, Some(&pow), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs libm.so.6"), "{err}");
    let out = check_elf(&pow, Some(&pow), &["--allow-libm"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("libm"), "{err}");
}
