//! install/install.sh, checked from the consumer's side: install the library built for this test
//! run into a temporary prefix, then build examples-c/ against the installed tree with pkg-config
//! (shared, and static through Libs.private) and with CMake's find_package (both imported targets,
//! from a DESTDIR-staged lib64 tree to prove the package is relocatable), run them, and compare the
//! installed header with include/causal_conv1d.h.
//!
//! Needs pkg-config and cmake. Missing: the test fails under CI=true and is skipped loudly otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the libcausal_conv1d.so and .a built for this test run:
/// target/<profile>/deps (fresh), else target/<profile>/ (left by `cargo build`).
fn built_lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap().to_path_buf();
    let has_both = |d: &PathBuf| d.join("libcausal_conv1d.so").exists() && d.join("libcausal_conv1d.a").exists();
    let found = [deps, profile].into_iter().find(has_both);
    found.unwrap_or_else(|| panic!("no libcausal_conv1d.so + .a next to {}", exe.display()))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// True when `tool` runs. Missing: panic under CI=true (CI must exercise this), else say so loudly.
fn have_tool(tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{tool} is missing and CI=true: the install test must run in CI (.ci/run installs it)");
    }
    eprintln!("\n*** SKIPPED: {tool} not found; install it to run this install test ***\n");
    false
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccv1d-install-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// install.sh --from <built libs> [args], with DESTDIR when given; returns its output.
fn install(args: &[&str], destdir: Option<&Path>) -> String {
    let mut c = Command::new("bash");
    c.arg(root().join("install/install.sh")).arg("--from").arg(built_lib_dir()).args(args);
    match destdir {
        Some(d) => c.env("DESTDIR", d),
        None => c.env_remove("DESTDIR"),
    };
    run(&mut c)
}

/// One install into a fresh prefix (default libdir), shared by the tests of this file.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let p = scratch("prefix");
        install(&["--prefix", p.to_str().unwrap()], None);
        p
    })
}

fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = run(Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .args(args)
        .arg("causal_conv1d"));
    out.split_whitespace().map(String::from).collect()
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn installed_tree_layout() {
    let lib = prefix().join("lib");
    let real = format!("libcausal_conv1d.so.{VERSION}");
    assert!(lib.join(&real).is_file());
    let link = |n: &str| std::fs::read_link(lib.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    assert_eq!(link("libcausal_conv1d.so.0"), Path::new(&real));
    assert_eq!(link("libcausal_conv1d.so"), Path::new("libcausal_conv1d.so.0"));
    assert!(lib.join("libcausal_conv1d.a").is_file());
    for f in ["causal_conv1dConfig.cmake", "causal_conv1dConfigVersion.cmake"] {
        assert!(lib.join("cmake/causal_conv1d").join(f).is_file(), "{f}");
    }
    let installed = std::fs::read(prefix().join("include/causal_conv1d.h")).unwrap();
    let source = std::fs::read(root().join("include/causal_conv1d.h")).unwrap();
    assert!(installed == source, "installed header differs from include/causal_conv1d.h");
}

#[test]
fn destdir_stages_under_the_final_prefix() {
    let stage = scratch("destdir");
    install(&["--prefix", "/opt/ccv1d", "--libdir", "lib64"], Some(&stage));
    let lib = stage.join("opt/ccv1d/lib64");
    assert!(lib.join(format!("libcausal_conv1d.so.{VERSION}")).is_file());
    assert!(stage.join("opt/ccv1d/include/causal_conv1d.h").is_file());
    let pc = std::fs::read_to_string(lib.join("pkgconfig/causal_conv1d.pc")).unwrap();
    assert!(pc.contains("prefix=/opt/ccv1d\n") && pc.contains("libdir=${prefix}/lib64\n"), "{pc}");
    let config = std::fs::read_to_string(lib.join("cmake/causal_conv1d/causal_conv1dConfig.cmake")).unwrap();
    assert!(!config.contains("/opt/ccv1d"), "the CMake package must not hard-code the prefix:\n{config}");
    let _ = std::fs::remove_dir_all(&stage);
}

#[test]
fn pkg_config_shared() {
    if !(have_tool("pkg-config")) {
        return;
    }
    assert_eq!(pkg_config(&["--modversion"]), [VERSION]);
    let exe = scratch("pc-shared").join("fwd_bwd");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Werror", "-O1"])
        .arg(root().join("examples-c/fwd_bwd.c"))
        .args(pkg_config(&["--cflags", "--libs"]))
        .arg("-lm") // the example's own exp()
        .arg("-o")
        .arg(&exe);
    run(&mut cc);
    // Found at run time through the SONAME symlink libcausal_conv1d.so.0 of the install.
    let out = run(Command::new(&exe).env("LD_LIBRARY_PATH", prefix().join("lib")));
    assert!(out.contains(": PASS"), "{out}");
}

#[test]
fn pkg_config_static() {
    if !(have_tool("pkg-config")) {
        return;
    }
    // Libs.private must be enough for the archive: name it, then `--static --libs` (its
    // -lcausal_conv1d is dropped by --as-needed since the archive already defined everything).
    // -nodefaultlibs keeps the driver from adding libgcc_s itself (the archive's unwinder needs
    // it), so only Libs.private and the final -lc supply system libraries.
    let lib_dir = pkg_config(&["--variable=libdir"]).concat();
    let exe = scratch("pc-static").join("fwd_bwd");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-O1"])
        .arg(root().join("examples-c/fwd_bwd.c"))
        .args(pkg_config(&["--cflags"]))
        .arg(Path::new(&lib_dir).join("libcausal_conv1d.a"))
        .arg("-Wl,--as-needed")
        .arg("-nodefaultlibs")
        .args(pkg_config(&["--static", "--libs"]))
        .args(["-lm", "-lc"])
        .arg("-o")
        .arg(&exe);
    run(&mut cc);
    // No library path at all: a dependency on libcausal_conv1d.so.0 would fail to load.
    let out = run(Command::new(&exe).env_remove("LD_LIBRARY_PATH"));
    assert!(out.contains(": PASS"), "{out}");
}

#[test]
fn cmake_find_package_relocated() {
    if !(have_tool("cmake") && have_tool("c++")) {
        return;
    }
    // Staged with DESTDIR under a prefix that does not exist: the package must find its files
    // relative to itself. lib64 checks the libdir depth is accounted for.
    let work = scratch("cmake");
    let stage = work.join("stage");
    install(&["--prefix", "/nonexistent/ccv1d", "--libdir", "lib64"], Some(&stage));
    let package_dir = stage.join("nonexistent/ccv1d/lib64/cmake/causal_conv1d");
    let build = work.join("build");
    let configure = run(Command::new("cmake")
        .arg("-S")
        .arg(root().join("tests/install_cmake"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-Dcausal_conv1d_DIR={}", package_dir.display()))
        .arg(format!("-DCCV1D_EXPECT_VERSION={VERSION}"))
        .arg("-DCMAKE_BUILD_TYPE=Release"));
    assert!(configure.contains(&format!("causal_conv1d {VERSION} from")), "{configure}");
    run(Command::new("cmake").arg("--build").arg(&build).args(["--parallel", "2"]));
    // CMake's build RPATH points at the staged lib64 for the shared targets.
    for exe in ["fwd_bwd_shared", "fwd_bwd_static", "decode_shared"] {
        let out = run(Command::new(build.join(exe)).env_remove("LD_LIBRARY_PATH"));
        assert!(out.contains(": PASS"), "{exe}: {out}");
    }
    let _ = std::fs::remove_dir_all(&work);
}
