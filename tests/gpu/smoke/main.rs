//! GPU smoke test of the driver layer (src/gpu): device helpers, pointer checks, context
//! handling, module cache, pooled/caller workspace, dynamic shared memory opt-in, launch
//! overhead, and (with `--fault` under CCV1D_SYNC_CHECK=1) fault reporting.
//!
//! It launches the tiny kernels of `smoke_kernels.cu` through the same path `ccv1d_fwd`/`bwd`
//! use (`gpu::testing::run` = the library's `exec`), so it needs no kernel selection.
//!
//!   nvcc -fatbin -gencode arch=compute_90,code=sm_90 -o k.fatbin tests/gpu/smoke/smoke_kernels.cu
//!   cargo build --release --example gpu_smoke
//!   target/release/tests/gpu/smoke k.fatbin                        # all checks
//!   CCV1D_SYNC_CHECK=1 target/release/tests/gpu/smoke k.fatbin --fault   # fault reporting
//!
//! Prints one `PASS`/`FAIL`/`INFO` line per check; exit status 1 when anything failed.

use std::ffi::{c_void, CStr};
use std::time::Instant;

mod raw;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::gpu::testing::{self, DeviceInfo, Launch, Vendor};

struct Report {
    failed: usize,
}

impl Report {
    fn check(&mut self, name: &str, ok: bool, detail: impl std::fmt::Display) {
        if ok {
            println!("PASS {name}: {detail}");
        } else {
            println!("FAIL {name}: {detail}");
            self.failed += 1;
        }
    }
    fn expect_status(&mut self, name: &str, r: Result<()>, status: i32, must_contain: &[&str]) {
        match r {
            Ok(()) => self.check(name, false, "succeeded, expected an error"),
            Err(e) => {
                let ok = e.status == status && must_contain.iter().all(|s| e.msg.contains(s));
                self.check(name, ok, format!("status {} ({}) message: {}", e.status, status_str(e.status), e.msg));
            }
        }
    }
}

fn status_str(s: i32) -> String {
    // SAFETY: returns a static C string.
    unsafe { CStr::from_ptr(ccv1d_status_string(s)) }.to_string_lossy().into_owned()
}

fn last_error() -> String {
    // SAFETY: thread-local C string, valid until the next call.
    unsafe { CStr::from_ptr(ccv1d_last_error()) }.to_string_lossy().into_owned()
}

/// `SmokeParams` of smoke_kernels.cu, 48 bytes.
#[allow(clippy::too_many_arguments)]
fn params(x: usize, out: usize, ws: usize, n: i64, a: f32, b: f32, k: i32) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(&(x as u64).to_le_bytes());
    v.extend_from_slice(&(out as u64).to_le_bytes());
    v.extend_from_slice(&(ws as u64).to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&a.to_le_bytes());
    v.extend_from_slice(&b.to_le_bytes());
    v.extend_from_slice(&k.to_le_bytes());
    v.extend_from_slice(&0i32.to_le_bytes());
    v
}

fn launch(kernel: &str, n: usize, shared: u32, params: Vec<u8>) -> Launch {
    Launch { kernel: kernel.into(), grid: [n.div_ceil(256) as u32, 1, 1], block: [256, 1, 1], shared_mem_bytes: shared, params, overlap_previous: false }
}

fn malloc(bytes: usize) -> usize {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    let s = unsafe { ccv1d_malloc(&mut p, bytes) };
    assert_eq!(s, CCV1D_OK, "ccv1d_malloc({bytes}): {}", last_error());
    p as usize
}

fn h2d(dst: usize, src: &[f32]) {
    // SAFETY: dst holds at least src.len() floats; src stays alive until the sync below.
    let s = unsafe {
        ccv1d_memcpy(dst as *mut c_void, src.as_ptr() as *const c_void, std::mem::size_of_val(src), std::ptr::null_mut())
    };
    assert_eq!(s, CCV1D_OK, "memcpy h2d: {}", last_error());
}

fn d2h(src: usize, n: usize) -> Vec<f32> {
    let mut v = vec![f32::NAN; n];
    // SAFETY: src holds n floats.
    let s = unsafe { ccv1d_memcpy(v.as_mut_ptr() as *mut c_void, src as *const c_void, n * 4, std::ptr::null_mut()) };
    assert_eq!(s, CCV1D_OK, "memcpy d2h: {}", last_error());
    // SAFETY: plain call.
    let s = unsafe { ccv1d_synchronize(std::ptr::null_mut()) };
    assert_eq!(s, CCV1D_OK, "synchronize: {}", last_error());
    v
}

/// Max |got - (a*x[idx(i)] + b)|.
fn max_err(got: &[f32], x: &[f32], a: f32, b: f32, idx: impl Fn(usize) -> usize) -> f32 {
    got.iter().enumerate().map(|(i, g)| (g - (a * x[idx(i)] + b)).abs()).fold(0.0, f32::max)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: gpu_smoke <smoke_kernels.fatbin | .hsaco> [--fault]");
        std::process::exit(2);
    };
    let fault_mode = args.iter().any(|a| a == "--fault");
    let (vendor, image) = testing::set_image_file(path).expect("kernel image");
    let bytes = image.len();

    let mut r = Report { failed: 0 };
    println!("INFO backends compiled: {:#x}; image {path} ({bytes} bytes) for {vendor:?}", ccv1d_backends_compiled());

    let mut count = 0;
    // SAFETY: valid out-pointer.
    let s = unsafe { ccv1d_device_count(&mut count) };
    r.check("device_count", s == CCV1D_OK && count >= 1, format!("status {s}, {count} device(s) {}", last_error()));
    if s != CCV1D_OK {
        println!("RESULT FAIL ({} failed): no device", r.failed);
        std::process::exit(1);
    }

    let n: usize = 1 << 20;
    let host: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 * 0.001 - 0.5).collect();
    r.check("is_device_pointer(host)", !causal_conv1d::gpu::is_device_pointer(host.as_ptr() as usize), "false");

    let x = malloc(n * 4);
    let out = malloc(n * 4);
    let ws_caller = malloc(n * 4);
    r.check("is_device_pointer(device)", causal_conv1d::gpu::is_device_pointer(x), format!("{x:#x}"));
    h2d(x, &host);

    let info: DeviceInfo = testing::device_info_of(x).expect("device info");
    let plausible = info.warp_size >= 32 && info.multiprocessors > 0 && info.max_threads_per_block >= 256 && info.arch > 0;
    r.check("device_info", plausible, format!("{info:?}"));

    // 1. Main thread, no current context: the library pushes the primary context.
    let fields = [("x", x), ("out", out)];
    let res =
        testing::run(&fields, 0, None, 0, |_, _| vec![launch("smoke_axpb", n, 0, params(x, out, 0, n as i64, 2.0, 1.0, 0))]);
    let got = d2h(out, n);
    let e = max_err(&got, &host, 2.0, 1.0, |i| i);
    r.check("launch, main thread", res.is_ok() && e == 0.0, format!("{res:?}, max err {e}"));

    // 2. A fresh thread (no current context either).
    let res = std::thread::spawn(move || {
        testing::run(&[("x", x), ("out", out)], 0, None, 0, |_, _| {
            vec![launch("smoke_axpb", n, 0, params(x, out, 0, n as i64, -3.0, 0.5, 0))]
        })
    })
    .join()
    .unwrap();
    let got = d2h(out, n);
    let e = max_err(&got, &host, -3.0, 0.5, |i| i);
    r.check("launch, other thread", res.is_ok() && e == 0.0, format!("{res:?}, max err {e}"));

    // 3. Pooled workspace (stream-ordered alloc + free around two launches), repeatedly (after
    // one warm-up call: the pool's first allocation maps its memory).
    let ws_call = |a: f32| {
        testing::run(&fields, 0, None, n * 4, |_, ws| {
            vec![
                launch("smoke_ws_write", n, 0, params(x, out, ws, n as i64, a, 0.0, 0)),
                launch("smoke_ws_read", n, 0, params(x, out, ws, n as i64, 0.0, -1.0, 0)),
            ]
        })
    };
    let t = Instant::now();
    let first = ws_call(1.0);
    let _ = d2h(out, 1);
    let first_us = t.elapsed().as_secs_f64() * 1e6;
    r.check("pooled workspace, first call", first.is_ok(), format!("{first:?}, {first_us:.0} us incl. sync"));
    let t = Instant::now();
    let mut res = Ok(());
    for it in 0..200 {
        res = res.and(ws_call(1.0 + it as f32));
    }
    // SAFETY: plain call.
    unsafe { ccv1d_synchronize(std::ptr::null_mut()) };
    let dt = t.elapsed().as_secs_f64() / 200.0 * 1e6;
    let got = d2h(out, n);
    let e = max_err(&got, &host, 200.0, -1.0, |i| i);
    r.check(
        "pooled workspace x200",
        res.is_ok() && e == 0.0,
        format!("{res:?}, max err {e}, {dt:.1} us/call (2 kernels over 4 MiB each, GPU-bound)"),
    );

    // 4. Caller's workspace: too small → WORKSPACE; enough → used.
    let res = testing::run(&[("x", x), ("out", out), ("workspace", ws_caller)], 0, Some((ws_caller, 16)), n * 4, |_, _| vec![]);
    r.expect_status("workspace too small", res, CCV1D_ERR_WORKSPACE, &["workspace"]);
    let res = testing::run(&[("x", x), ("out", out), ("workspace", ws_caller)], 0, Some((ws_caller, n * 4)), n * 4, |_, ws| {
        assert_eq!(ws, ws_caller);
        vec![
            launch("smoke_ws_write", n, 0, params(x, out, ws, n as i64, 5.0, 0.0, 0)),
            launch("smoke_ws_read", n, 0, params(x, out, ws, n as i64, 0.0, 2.0, 0)),
        ]
    });
    let got = d2h(out, n);
    let e = max_err(&got, &host, 5.0, 2.0, |i| i);
    r.check("caller workspace", res.is_ok() && e == 0.0, format!("{res:?}, max err {e}"));

    // 5. Host pointers → WRONG_DEVICE naming the field.
    let hp = host.as_ptr() as usize;
    let res = testing::run(&[("x", hp), ("out", out)], 0, None, 0, |_, _| vec![]);
    r.expect_status("host x", res, CCV1D_ERR_WRONG_DEVICE, &["`x`"]);
    let res = testing::run(&[("x", x), ("weight", hp), ("out", out)], 0, None, 0, |_, _| vec![]);
    r.expect_status("host weight", res, CCV1D_ERR_WRONG_DEVICE, &["`weight`"]);
    let res = testing::run(&[("x", x), ("out", 0x1000)], 0, None, 0, |_, _| vec![]);
    r.expect_status("bogus out", res, CCV1D_ERR_WRONG_DEVICE, &["`out`"]);

    // 6. ~100 KiB of dynamic shared memory (NVIDIA: needs the opt-in attribute).
    let k = 100; // 100 rows x 256 floats = 102400 bytes
    let shared = (k * 256 * 4) as u32;
    if info.max_shared_mem_per_block >= shared {
        let res = testing::run(&fields, 0, None, 0, |_, _| {
            vec![launch("smoke_shared", n, shared, params(x, out, 0, n as i64, 3.0, 0.25, k))]
        });
        let got = d2h(out, n);
        let e = max_err(&got, &host, 3.0, 0.25, |i| (i / 256) * 256 + (255 - i % 256));
        r.check("100 KiB dynamic shared memory", res.is_ok() && e == 0.0, format!("{res:?}, max err {e}"));
    } else {
        println!("INFO skip shared-memory check: device allows {} bytes", info.max_shared_mem_per_block);
    }

    // 7. Library bugs are INTERNAL: unknown kernel, short parameter block.
    let res = testing::run(&fields, 0, None, 0, |_, _| vec![launch("no_such_kernel", n, 0, params(x, out, 0, 0, 0.0, 0.0, 0))]);
    r.expect_status("unknown kernel", res, CCV1D_ERR_INTERNAL, &["no_such_kernel"]);
    let res = testing::run(&fields, 0, None, 0, |_, _| vec![launch("smoke_axpb", 1, 0, vec![0u8; 16])]);
    match res {
        Err(e) if e.status == CCV1D_ERR_INTERNAL => r.check("short parameter block", true, e.msg),
        other => println!("INFO short parameter block not detected by this driver: {other:?}"),
    }

    // 8. Launch overhead (host side, tiny kernel, default stream, no sync per call).
    let small = 256usize;
    let mut res = Ok(());
    let t = Instant::now();
    let calls = 20000;
    for _ in 0..calls {
        res = res.and(testing::run(&fields, 0, None, 0, |_, _| {
            vec![launch("smoke_axpb", small, 0, params(x, out, 0, small as i64, 1.0, 0.0, 0))]
        }));
    }
    let host_us = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
    let _ = d2h(out, 1);
    let total_us = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
    r.check(
        "launch overhead",
        res.is_ok(),
        format!("{host_us:.2} us/call host time, {total_us:.2} us/call incl. drain ({calls} calls)"),
    );

    // 8b. NVIDIA: as a framework would: a current context, own streams, graph capture.
    if vendor == Vendor::Nvidia {
        framework_checks(&mut r, image, x, out, n, &host);
    }

    // 9. C API helpers: free of a host pointer, free of device memory, zero-byte malloc.
    // SAFETY: host pointer passed on purpose; the library must refuse it.
    let s = unsafe { ccv1d_free(hp as *mut c_void) };
    r.check("ccv1d_free(host)", s == CCV1D_ERR_WRONG_DEVICE, format!("status {s}: {}", last_error()));
    let mut p0: *mut c_void = 1 as *mut c_void;
    // SAFETY: valid out-pointer.
    let s = unsafe { ccv1d_malloc(&mut p0, 0) };
    r.check("ccv1d_malloc(0)", s == CCV1D_OK && p0.is_null(), format!("status {s}, ptr {p0:?}"));

    // 10. Fault reporting (run separately: a fault poisons the context for the process).
    if fault_mode {
        let res =
            testing::run(&fields, 0, None, 0, |_, _| vec![launch("smoke_fault", 1, 0, params(x, out, 0x10, 1, 0.0, 0.0, 0))]);
        r.expect_status("fault reported (CCV1D_SYNC_CHECK=1)", res, CCV1D_ERR_DEVICE, &["smoke_fault"]);
    } else {
        for p in [x, out, ws_caller] {
            // SAFETY: pointers from ccv1d_malloc.
            let s = unsafe { ccv1d_free(p as *mut c_void) };
            r.check("ccv1d_free", s == CCV1D_OK, format!("status {s} {}", last_error()));
        }
    }

    if r.failed == 0 {
        println!("RESULT PASS");
    } else {
        println!("RESULT FAIL ({} failed)", r.failed);
        std::process::exit(1);
    }
}

/// With a context current (as PyTorch leaves it), on the caller's own stream, and under graph
/// capture; plus the raw-launch baseline the library's overhead compares with.
fn framework_checks(r: &mut Report, image: &'static [u8], x: usize, out: usize, n: usize, host: &[f32]) {
    let Some(raw) = raw::Raw::load() else {
        println!("INFO skip framework checks: no libcuda for the test's own calls");
        return;
    };
    let fields = [("x", x), ("out", out)];
    let small = 256usize;
    let calls = 20000;
    // SAFETY: raw driver calls with valid out-pointers; the context and module live to the end.
    unsafe {
        let mut ctx = 0;
        raw::ok((raw.cuDevicePrimaryCtxRetain)(&mut ctx, 0), "cuDevicePrimaryCtxRetain");
        raw::ok((raw.cuCtxSetCurrent)(ctx), "cuCtxSetCurrent");

        // Baseline: the same tiny kernel launched directly, no checks.
        let mut module = 0;
        raw::ok((raw.cuModuleLoadData)(&mut module, image.as_ptr() as *const c_void), "cuModuleLoadData");
        let mut f = 0;
        let name = std::ffi::CString::new("smoke_axpb").unwrap();
        raw::ok((raw.cuModuleGetFunction)(&mut f, module, name.as_ptr()), "cuModuleGetFunction");
        let p = params(x, out, 0, small as i64, 1.0, 0.0, 0);
        let t = Instant::now();
        for _ in 0..calls {
            let mut args = [p.as_ptr() as *mut c_void];
            raw::ok((raw.cuLaunchKernel)(f, 1, 1, 1, 256, 1, 1, 0, 0, args.as_mut_ptr(), std::ptr::null_mut()), "cuLaunchKernel");
        }
        let raw_us = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
        raw::ok((raw.cuCtxSynchronize)(), "cuCtxSynchronize");
        println!("INFO raw cuLaunchKernel: {raw_us:.2} us/call host time");

        // The library with the primary context already current: used as is, nothing pushed.
        let mut res = Ok(());
        let t = Instant::now();
        for _ in 0..calls {
            res = res.and(testing::run(&fields, 0, None, 0, |_, _| {
                vec![launch("smoke_axpb", small, 0, params(x, out, 0, small as i64, 1.0, 0.0, 0))]
            }));
        }
        let lib_us = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
        raw::ok((raw.cuCtxSynchronize)(), "cuCtxSynchronize");
        r.check(
            "launch with context current",
            res.is_ok() && raw.current() == ctx,
            format!("{res:?}, {lib_us:.2} us/call host time (raw launch {raw_us:.2}); context still current"),
        );
        let t = Instant::now();
        let mut any = false;
        for _ in 0..100000 {
            any |= causal_conv1d::gpu::is_device_pointer(x);
        }
        println!("INFO one pointer check (is_device_pointer): {:.0} ns", t.elapsed().as_secs_f64() / 100000.0 * 1e9);
        assert!(any);

        // No context current: the library pushes the primary context and pops it again.
        raw::ok((raw.cuCtxSetCurrent)(0), "cuCtxSetCurrent(NULL)");
        let t = Instant::now();
        let mut res = Ok(());
        for _ in 0..calls {
            res = res.and(testing::run(&fields, 0, None, 0, |_, _| {
                vec![launch("smoke_axpb", small, 0, params(x, out, 0, small as i64, 1.0, 0.0, 0))]
            }));
        }
        let push_us = t.elapsed().as_secs_f64() / calls as f64 * 1e6;
        r.check(
            "no context: pushed and popped",
            res.is_ok() && raw.current() == 0,
            format!("{res:?}, {push_us:.2} us/call; thread left without a context"),
        );
        raw::ok((raw.cuCtxSetCurrent)(ctx), "cuCtxSetCurrent");

        // The caller's own (non-blocking) stream, pooled workspace, synchronized by stream.
        let mut stream = 0;
        raw::ok((raw.cuStreamCreate)(&mut stream, 1), "cuStreamCreate");
        let ws_call = |s: usize, a: f32, b: f32| {
            testing::run(&fields, s, None, n * 4, |_, ws| {
                vec![
                    launch("smoke_ws_write", n, 0, params(x, out, ws, n as i64, a, 0.0, 0)),
                    launch("smoke_ws_read", n, 0, params(x, out, ws, n as i64, 0.0, b, 0)),
                ]
            })
        };
        let res = ws_call(stream, 4.0, 0.5);
        let s1 = ccv1d_synchronize(stream as *mut c_void);
        let got = d2h(out, n);
        let e = max_err(&got, host, 4.0, 0.5, |i| i);
        r.check(
            "own stream + pooled workspace",
            res.is_ok() && s1 == CCV1D_OK && e == 0.0,
            format!("{res:?}, sync {s1}, max err {e}"),
        );

        // Graph capture of a call with a pooled workspace, then replay on new data.
        raw::ok((raw.cuStreamBeginCapture_v2)(stream, 0), "cuStreamBeginCapture");
        let res = ws_call(stream, 7.0, 3.0);
        let mut graph = 0;
        let end = (raw.cuStreamEndCapture)(stream, &mut graph);
        let mut exec = 0;
        let inst = if end == 0 { (raw.cuGraphInstantiateWithFlags)(&mut exec, graph, 0) } else { -1 };
        let host2: Vec<f32> = host.iter().map(|v| v * 0.5 - 1.0).collect();
        h2d(x, &host2);
        let _ = d2h(out, 1);
        let launched = if inst == 0 { (raw.cuGraphLaunch)(exec, stream) } else { -1 };
        let s2 = ccv1d_synchronize(stream as *mut c_void);
        let got = d2h(out, n);
        let e = max_err(&got, &host2, 7.0, 3.0, |i| i);
        r.check(
            "graph capture + replay (pooled workspace)",
            res.is_ok() && end == 0 && inst == 0 && launched == 0 && s2 == CCV1D_OK && e == 0.0,
            format!("call {res:?}, end {end}, instantiate {inst}, launch {launched}, sync {s2}, max err {e}"),
        );
        h2d(x, host);
        let _ = d2h(out, 1);
        if inst == 0 {
            (raw.cuGraphExecDestroy)(exec);
        }
        if end == 0 {
            (raw.cuGraphDestroy)(graph);
        }
        (raw.cuStreamDestroy_v2)(stream);
        raw::ok((raw.cuCtxSetCurrent)(0), "cuCtxSetCurrent(NULL)");
    }
}
