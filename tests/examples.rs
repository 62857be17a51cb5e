//! Builds the programs in examples-c/ against include/causal_conv1d.h and the real cdylib, runs
//! them and checks their output (each prints PASS and exits 0 only when its own check passes).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding the libcausal_conv1d.so built for this test run: target/<profile>/deps
/// (fresh), else target/<profile>/ (left by `cargo build`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap().to_path_buf();
    let found = [deps, profile].into_iter().find(|d| d.join("libcausal_conv1d.so").exists());
    found.unwrap_or_else(|| panic!("no libcausal_conv1d.so next to {}", exe.display()))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// Compile `src` with `compiler` and `flags`, link the library, run it, return its output.
fn build_and_run(compiler: &str, flags: &[&str], src: &str, name: &str) -> String {
    let tmp = std::env::temp_dir().join(format!("ccv1d-example-{}-{name}", std::process::id()));
    // The library's SONAME is libcausal_conv1d.so.0 (what an install provides): link and run
    // against a private directory that has both names.
    let lib = tmp.with_extension("lib");
    std::fs::create_dir_all(&lib).unwrap();
    for n in ["libcausal_conv1d.so", "libcausal_conv1d.so.0"] {
        let _ = std::fs::remove_file(lib.join(n));
        std::os::unix::fs::symlink(lib_dir().join("libcausal_conv1d.so"), lib.join(n)).unwrap();
    }
    let mut c = Command::new(compiler);
    c.args(flags)
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join("examples-c").join(src))
        .arg("-o")
        .arg(&tmp)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lcausal_conv1d", "-lm"]);
    run(&mut c);
    let text = run(&mut Command::new(&tmp));
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir_all(&lib);
    text
}

#[test]
fn c11_forward_backward() {
    let out = build_and_run("cc", &["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"], "fwd_bwd.c", "c");
    assert!(out.contains(": PASS"), "{out}");
    assert!(out.contains("width=9 -> WIDTH"), "{out}");
}

#[test]
fn cxx17_decode_loop() {
    let out = build_and_run("c++", &["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1"], "decode.cpp", "cxx");
    assert!(out.contains(": PASS"), "{out}");
}

#[test]
fn c_with_sanitizers() {
    // ASan/UBSan on the C side of the boundary (the library itself is Rust).
    let out = build_and_run("cc", &["-std=c11", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"], "fwd_bwd.c", "asan");
    assert!(out.contains(": PASS"), "{out}");
}

#[test]
fn python_ctypes() {
    let so = lib_dir().join("libcausal_conv1d.so");
    let out = run(Command::new("python3").arg(root().join("examples-c/ctypes_demo.py")).arg(&so));
    assert!(out.contains(": PASS"), "{out}");
    assert!(out.contains("width=0 -> ccv1d_fwd: WIDTH"), "{out}");
}
