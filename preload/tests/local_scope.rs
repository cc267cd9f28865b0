//! `dlsym(RTLD_DEFAULT, name)` from an object opened with `RTLD_LOCAL` must still see that
//! object's own dependencies with the interposer preloaded: glibc searches the caller's
//! scope, so the interposer may only call glibc's `dlsym` itself for the driver names it
//! wraps, and must jump to it for every other name.

mod common;

use std::path::Path;
use std::process::Command;

fn cc(args: &[&str]) {
    let out = Command::new("cc").args(args).output().expect("run cc");
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn probe(exe: &Path, user: &Path, preload: Option<&Path>) -> String {
    let mut cmd = Command::new(exe);
    cmd.arg(user);
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
    }
    let out = cmd.output().expect("run probe");
    assert!(
        out.status.success(),
        "probe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn rtld_default_keeps_the_callers_local_scope() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_str().expect("utf8");
    let src = common::c_dir().join("local_scope.c");
    let src = src.to_str().expect("utf8");
    let dep = format!("{d}/libscope_dep.so");
    let user = format!("{d}/libscope_user.so");
    let exe = format!("{d}/scope_main");
    cc(&["-shared", "-fPIC", "-DSCOPE_DEP", "-o", &dep, src]);
    cc(&[
        "-shared",
        "-fPIC",
        "-DSCOPE_USER",
        "-o",
        &user,
        src,
        "-L",
        d,
        // The user never calls the dependency directly: keep the link anyway (Ubuntu's
        // toolchains default to --as-needed).
        "-Wl,--no-as-needed",
        "-lscope_dep",
        "-Wl,-rpath,$ORIGIN",
        "-ldl",
    ]);
    cc(&["-o", &exe, src, "-ldl"]);
    let (exe, user) = (Path::new(&exe), Path::new(&user));
    // Without the interposer: the setup really has a symbol only the local scope holds.
    assert_eq!(probe(exe, user, None), "found=1");
    let lib = common::preload_lib();
    assert_eq!(
        probe(exe, user, Some(&lib)),
        "found=1",
        "with {}",
        lib.display()
    );
}
