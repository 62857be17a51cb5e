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

/// A compiled example: the executable and the private library directory it links against.
struct Built {
    exe: PathBuf,
    lib: PathBuf,
}

impl Drop for Built {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.exe);
        let _ = std::fs::remove_dir_all(&self.lib);
    }
}

/// Compile `src` with `compiler` and `flags`, linked against the library.
fn build(compiler: &str, flags: &[&str], src: &str, name: &str) -> Built {
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
    Built { exe: tmp, lib }
}

/// Compile `src` with `compiler` and `flags`, link the library, run it, return its output.
fn build_and_run(compiler: &str, flags: &[&str], src: &str, name: &str) -> String {
    let built = build(compiler, flags, src, name);
    run(&mut Command::new(&built.exe))
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
fn c_error_paths_with_sanitizers() {
    // One bad call per validation rule reachable on the CPU: exact status, a message naming the
    // field, every buffer byte-identical; status_string of every code.
    let flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"];
    let out = build_and_run("cc", &flags, "errors.c", "errors-asan");
    assert!(out.contains(" 0 failures: PASS"), "{out}");
    for status in ["NULL_POINTER", "STRUCT_SIZE", "DTYPE", "ACTIVATION", "BACKEND", "WIDTH", "DIM", "OVERFLOW", "SHAPE", "CU_SEQLENS", "OVERLAP", "INDEX", "NO_DEVICE"] {
        assert!(out.contains(&format!("-> {status:<12} ")), "no {status} case in:\n{out}");
    }
}

#[test]
fn python_ctypes() {
    let so = lib_dir().join("libcausal_conv1d.so");
    let out = run(Command::new("python3").arg(root().join("examples-c/ctypes_demo.py")).arg(&so));
    assert!(out.contains(": PASS"), "{out}");
    assert!(out.contains("width=0 -> ccv1d_fwd: WIDTH"), "{out}");
}

/// valgrind on PATH; a missing valgrind fails under CI=true and is a loud skip otherwise.
fn valgrind() -> Option<&'static str> {
    if Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("valgrind");
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true but valgrind is not installed (apt-get install valgrind)");
    eprintln!("\n*** SKIPPED: valgrind is not installed; the memcheck tests did not run ***\n");
    None
}

/// Run `exe args` under memcheck: 0 errors and 0 bytes definitely lost, else exit 99.
fn memcheck(exe: &Path, args: &[&str]) -> String {
    let mut c = Command::new("valgrind");
    c.args(["--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite"])
        .arg(exe)
        .args(args)
        .env("CCV1D_NUM_THREADS", "2");
    let text = run(&mut c);
    assert!(text.contains("ERROR SUMMARY: 0 errors"), "{text}");
    assert!(!text.contains("definitely lost:") || text.contains("definitely lost: 0 bytes"), "{text}");
    text
}

#[test]
fn valgrind_c_examples() {
    if valgrind().is_none() {
        return;
    }
    let flags = ["-std=c11", "-g", "-O1"];
    for (compiler, flags, src) in [("cc", &flags[..], "fwd_bwd.c"), ("c++", &["-std=c++17", "-g", "-O1"][..], "decode.cpp"), ("cc", &flags[..], "errors.c")] {
        let built = build(compiler, flags, src, &format!("vg-{src}"));
        let out = memcheck(&built.exe, &[]);
        assert!(out.contains(": PASS"), "{src}: {out}");
    }
}

#[test]
fn valgrind_cpu_cases() {
    if valgrind().is_none() {
        return;
    }
    // A slice of `ccv1d test` (oracle-checked, guard zones): packed varlen, decode update,
    // states, non-contiguous views — the CPU backend's main paths, small shapes.
    let exe = Path::new(env!("CARGO_BIN_EXE_ccv1d"));
    for filter in ["varlen", "update/", "states/w4-L4", "views"] {
        let out = memcheck(exe, &["test", "--filter", filter, "--threads", "1"]);
        assert!(out.contains(" passed, 0 failed"), "{filter}: {out}");
    }
}
