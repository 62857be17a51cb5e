//! The Python package in python/ (ctypes bindings): runs its unittest suite against the
//! libcausal_conv1d.so built for this test run, and checks that `pip install` of the package
//! works offline and imports from the install location, loading a bundled copy of the library.
//! Needs python3 with numpy (and pip for the install check): a failure under CI=true when
//! missing, a loud skip otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>/deps (fresh) or target/<profile>/ (left by `cargo build`), as in examples.rs.
fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap().to_path_buf();
    [deps, profile]
        .into_iter()
        .map(|d| d.join("libcausal_conv1d.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no libcausal_conv1d.so next to {}", exe.display()))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// True when the tool works; otherwise panics under CI=true, or prints a loud skip and returns false.
fn have(what: &str, probe: &mut Command) -> bool {
    if probe.output().map(|o| o.status.success()).unwrap_or(false) {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true but {what} is missing ({probe:?} failed)");
    }
    eprintln!("\n*** SKIPPED: {what} is missing ({probe:?} failed) ***\n");
    false
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

fn python() -> Command {
    let mut c = Command::new("python3");
    c.current_dir(root()).env_remove("PYTHONPATH").env("PYTHONDONTWRITEBYTECODE", "1");
    c
}

#[test]
fn python_unittest_suite() {
    if !have("python3 with numpy", python().args(["-c", "import numpy"])) {
        return;
    }
    let text = run(python()
        .args(["-m", "unittest", "discover", "-s", "python/tests", "-v"])
        .env("CAUSAL_CONV1D_LIB", lib_path()));
    eprintln!("{text}");
    let ran: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("Ran ").and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok()))
        .unwrap_or_else(|| panic!("no 'Ran N tests' line:\n{text}"));
    // 25 tests need only numpy + cc; the torch ones are extra (and skip loudly without torch).
    assert!(ran >= 25, "only {ran} tests ran:\n{text}");
    assert!(text.lines().any(|l| l.starts_with("OK")), "{text}");
    for must_run in ["test_offsets_and_sizes_match_the_c_compiler", "test_widths_layouts_bias_activation"] {
        let line = text.lines().find(|l| l.starts_with(must_run)).unwrap_or_else(|| panic!("{must_run} missing:\n{text}"));
        assert!(line.ends_with("ok"), "{must_run} did not pass: {line}");
    }
}

/// Copy the package sources (not build leftovers) from python/ into `dst`.
fn copy_package(dst: &Path) {
    let src = root().join("python");
    std::fs::create_dir_all(dst.join("ccv1d")).unwrap();
    for f in ["pyproject.toml", "_build_backend.py", "README.md"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    for e in std::fs::read_dir(src.join("ccv1d")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "py") {
            std::fs::copy(&p, dst.join("ccv1d").join(p.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn pip_install_offline_and_import() {
    if !have("python3 with pip", python().args(["-m", "pip", "--version"])) {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("ccv1d-pip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (src, site) = (tmp.join("src"), tmp.join("site"));
    copy_package(&src);
    // Bundle the library next to the package: found without CAUSAL_CONV1D_LIB after install.
    std::fs::copy(lib_path(), src.join("ccv1d").join("libcausal_conv1d.so")).unwrap();
    // --no-index: nothing may come from the network; the in-tree backend needs no setuptools.
    for isolation in [&["--no-build-isolation"][..], &[][..]] {
        let _ = std::fs::remove_dir_all(&site);
        run(python()
            .args(["-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check"])
            .args(isolation)
            .arg("--target")
            .arg(&site)
            .arg(&src));
        let probe = "import ccv1d, ccv1d._lib as L, array\n\
                     print(ccv1d.__file__)\n\
                     print(L.lib()._name)\n\
                     p = L.new_params(L.ccv1d_fwd_params, width=9)\n\
                     try:\n    L.call('ccv1d_fwd', p)\n\
                     except ccv1d.Ccv1dError as e: print(e.status_name)\n";
        let out = run(python().current_dir(&tmp).env("PYTHONPATH", &site).env_remove("CAUSAL_CONV1D_LIB").args(["-c", probe]));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with(site.join("ccv1d").to_str().unwrap()), "imported from elsewhere: {out}");
        assert_eq!(lines[1], site.join("ccv1d").join("libcausal_conv1d.so").to_str().unwrap(), "{out}");
        assert_eq!(lines[2], "WIDTH", "{out}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
