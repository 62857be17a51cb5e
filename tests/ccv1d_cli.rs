//! The `ccv1d` binary run as a user runs it: `info`, a small `test` selection, the usage-error
//! and no-GPU exit paths, and a tiny `bench`. Kept to a few seconds.

use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ccv1d(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_ccv1d"))
        .args(args)
        .env_remove("CCV1D_TEST_BACKEND")
        .output()
        .expect("run the ccv1d binary");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn has_gpu() -> bool {
    let mut n = 0;
    let st = unsafe { causal_conv1d::capi::ccv1d_device_count(&mut n) };
    st == causal_conv1d::error::CCV1D_OK && n > 0
}

#[test]
fn info_lists_version_backends_devices_threads() {
    let r = ccv1d(&["info"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(concat!("causal-conv1d ", env!("CARGO_PKG_VERSION"))), "{}", r.stdout);
    assert!(r.stdout.contains("backends compiled: cpu"), "{}", r.stdout);
    assert!(r.stdout.contains("GPUs: "), "{}", r.stdout);
    if !has_gpu() {
        assert!(r.stdout.contains("NO_DEVICE"), "{}", r.stdout);
    }
    assert!(r.stdout.contains("CPU backend threads: "), "{}", r.stdout);
}

#[test]
fn test_small_selection_passes() {
    // states/w4-L2 (L < W-1): 3 dtypes × 2 layouts × fwd/bwd = 12 cases.
    let r = ccv1d(&["test", "--filter", "states/w4-L2"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("12 passed, 0 failed"), "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("PASS")).collect();
    assert_eq!(lines.len(), 12, "{}", r.stdout);
    for l in &lines {
        // name, op, dtype, layout, shape, and per output its errors and tolerance.
        assert!(l.contains("states/w4-L2") && l.contains("2x12x2 w4") && l.contains("max_abs") && l.contains("tol"), "{l}");
    }
    assert!(lines.iter().any(|l| l.contains(" bwd ") && l.contains("dinitial_states:") && l.contains("dweight:")), "{}", r.stdout);
    assert!(lines.iter().any(|l| l.contains(" fwd ") && l.contains("final_states:")), "{}", r.stdout);
}

#[test]
fn test_filters_by_op_dtype_layout() {
    let r = ccv1d(&["test", "--filter", "update/circular", "--op", "update", "--dtype", "bf16", "--layout", "cl", "--seed", "0x2a"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("1 passed, 0 failed") && r.stdout.contains("seed 42"), "{}", r.stdout);
    assert!(r.stdout.contains("conv_state: max_abs 0.00e0 (exact copy)"), "{}", r.stdout);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["test", "--bogus"][..],
        &["test", "--dtype", "f64"],
        &["test", "--seed"],
        &["bench", "--preset", "nope"],
        &["bench", "--iters", "many"],
        &["bench", "--shape", "4x64"],
        &["bench", "--shape", "4x0x64"],
        &["bench", "--shape", "1x32x64", "--width", "9"],
        &["bench", "--shape", "1x32x64", "--preset", "mamba"],
        &["bench", "--width", "3"],
        &["frobnicate"],
        &[],
    ] {
        let r = ccv1d(args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("usage: ccv1d"), "{args:?}: {}", r.stderr);
    }
    let r = ccv1d(&["test", "--bogus"]);
    assert!(r.stderr.contains("unknown option --bogus"), "{}", r.stderr);
    // A selection that matches nothing is an error too, not "0 passed".
    let r = ccv1d(&["test", "--filter", "no-such-case"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
}

#[test]
fn gpu_backend_without_gpu_fails() {
    if has_gpu() {
        eprintln!("a GPU is present: the no-GPU exit path is not exercised");
        return;
    }
    for cmd in ["test", "bench"] {
        let r = ccv1d(&[cmd, "--backend", "gpu", "--filter", "Tiny"]);
        assert_eq!(r.code, 1, "{cmd}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("no usable GPU") && r.stderr.contains("NO_DEVICE"), "{cmd}: {}", r.stderr);
    }
}

#[test]
fn bench_tiny_table_with_bandwidth() {
    let json = std::env::temp_dir().join(format!("ccv1d_cli_bench_{}.json", std::process::id()));
    let png = std::env::temp_dir().join(format!("ccv1d_cli_bench_{}.png", std::process::id()));
    let r = ccv1d(&[
        "bench",
        "--preset",
        "seeds",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--op",
        "fwd",
        "--filter",
        "Tiny",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("BW(GB/s)") && r.stdout.contains("%copy") && r.stdout.contains("Median(ms)"), "{}", r.stdout);
    assert!(r.stdout.contains("copy_reference") && r.stdout.contains("host memcpy"), "{}", r.stdout);
    // 3 dtypes × 2 layouts, each with a positive bandwidth.
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("000/Tiny")).collect();
    assert_eq!(rows.len(), 6, "{}", r.stdout);
    for l in rows {
        let cols: Vec<&str> = l.split_whitespace().collect();
        // name op dtype lay act shape(2 words) median min mean gbs %copy iters sets cache
        let gbs: f64 = cols[10].parse().unwrap_or_else(|_| panic!("GB/s column of {l:?}"));
        assert!(gbs > 0.0 && gbs.is_finite(), "{l}");
        assert_eq!(cols[12], "2", "{l}");
    }
    assert!(r.stderr.contains("[6/6]"), "progress on stderr: {}", r.stderr);
    let j = std::fs::read_to_string(&json).expect("json written");
    let _ = std::fs::remove_file(&json);
    assert_eq!(j.matches("\"gbs\": ").count(), 6, "{j}");
    check_plot(&png);
}

/// The PNG decodes with Python's zlib (tests/png_check.py: CRCs, IHDR, Adler-32, size) and has
/// more than the white/black/grey of an empty chart: 3 fwd dtypes drawn in 3 colours.
fn check_plot(png: &std::path::Path) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/png_check.py");
    let out = Command::new("python3").arg(script).arg(png).output();
    let _ = std::fs::remove_file(png);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "python3 is needed to check the --plot PNG: {e}");
            eprintln!("SKIPPED: python3 not runnable ({e}); the --plot PNG is not decoded");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "png_check.py: {text}{}", String::from_utf8_lossy(&out.stderr));
    let v: Vec<usize> = text.split_whitespace().map(|w| w.parse().unwrap()).collect();
    assert_eq!(v[..2], [1200, 800], "{text}");
    // white, black, grid, copy line + one colour per (op, dtype)
    assert!(v[2] >= 4 + 3, "{text}");
}

#[test]
fn bench_own_shape() {
    let r = ccv1d(&["bench", "--shape", "2x40x33", "--width", "6", "--act", "none", "--iters", "1", "--warmup", "0", "--dtype", "bf16"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // fwd and bwd x both layouts, and the update at state_len 5 and 6 x both layouts, at the
    // given width, without activation
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("shape/2x40x33")).collect();
    assert_eq!(rows.len(), 8, "{}", r.stdout);
    assert!(rows.iter().all(|l| l.contains("2x40x33 w6") && l.split_whitespace().nth(4) == Some("-")), "{}", r.stdout);
    let updates: Vec<&str> = rows.iter().copied().filter(|l| l.split_whitespace().nth(1) == Some("update")).collect();
    assert_eq!(updates.iter().filter(|l| l.contains("w6 state5")).count(), 2, "{}", r.stdout);
    assert_eq!(updates.iter().filter(|l| l.contains("w6 state6")).count(), 2, "{}", r.stdout);
}

#[test]
fn bench_plot_unwritable_path_exits_1() {
    let r = ccv1d(&["bench", "--iters", "1", "--warmup", "0", "--op", "fwd", "--dtype", "f32", "--layout", "cf", "--filter", "Tiny", "--plot", "/nonexistent-dir/p.png"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("cannot write /nonexistent-dir/p.png"), "{}", r.stderr);
}
