//! GPU faults, on a GPU machine only (every test is `#[ignore]`d: shown as ignored without a GPU,
//! never as passed; with `--ignored` and no `CCV1D_TEST_BACKEND=gpu` they fail):
//!
//!     CCV1D_TEST_BACKEND=gpu cargo test --release --test gpu_faults -- --ignored --test-threads=1
//!
//! - out of memory: a huge `ccv1d_malloc`, and a backward whose pooled workspace is over
//!   `CCV1D_GPU_POOL_LIMIT_BYTES`, answer OUT_OF_MEMORY naming what failed, write nothing, and
//!   the next calls work;
//! - a kernel that faults (a view whose strides run far past its allocation: the host cannot know
//!   an allocation's size) is reported as DEVICE — at the launch naming the kernel with
//!   `CCV1D_SYNC_CHECK=1`, else at the next synchronize — and every later call answers an error
//!   (the context is lost) instead of crashing.
//!
//! Knobs that are read once per process and faults that poison the context run in a child
//! process: the test runs itself again (`--exact <name>`, marker `CCV1D_FAULTS_CHILD=1`).

use std::ffi::c_void;
use std::ptr::null_mut;

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::harness::*;
use causal_conv1d::params::*;
use causal_conv1d::plan::DType;

fn need_gpu() {
    assert!(on_gpu(), "GPU test: run with CCV1D_TEST_BACKEND=gpu on a machine with a GPU");
}

/// In the parent: run this same test (`name`) again in a fresh process with `env` and the marker
/// `CCV1D_FAULTS_CHILD=1`; its output. In that child: None (run the body).
fn in_child(name: &str, env: &[(&str, &str)]) -> Option<String> {
    if std::env::var("CCV1D_FAULTS_CHILD").as_deref() == Ok("1") {
        return None;
    }
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", name, "--nocapture", "--test-threads=1"]).env("CCV1D_FAULTS_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the child test process");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("--- child {name} {env:?}:\n{text}");
    assert!(out.status.success(), "child {name} failed (exit {:?}), output above", out.status.code());
    assert!(text.contains("1 passed"), "child {name} did not run its test");
    Some(text)
}

fn plain_case(rng: &mut Rng, bwd: bool) -> (ConvCfg, ConvTensors) {
    // 3 rows of 1000 tokens: its backward needs a workspace (up to 2048 tokens a channel go to
    // one block, which stores dweight/dbias itself)
    let mut c = ConvCfg::plain(3, 64, 1000, 4, DType::F32, Kind::Cf, rng);
    c.silu = true;
    let t = ConvTensors::build(&c, rng, bwd);
    t.upload(&c);
    (c, t)
}

// ---------------------------------------------------------------------------------------------
// Out of memory

#[test]
#[ignore = "GPU only: CCV1D_TEST_BACKEND=gpu cargo test --test gpu_faults -- --ignored"]
fn huge_malloc_is_out_of_memory_then_calls_work() {
    need_gpu();
    let mut p: *mut c_void = 0x1234 as *mut c_void;
    let st = unsafe { ccv1d_malloc(&mut p, 1usize << 50) };
    assert_eq!(st, CCV1D_ERR_OUT_OF_MEMORY, "ccv1d_malloc(2^50): {} {}", status_str(st), last_error());
    assert!(last_error().contains("cuMemAlloc") || last_error().contains("hipMalloc"), "{}", last_error());
    assert_eq!(p as usize, 0x1234, "*ptr written although the allocation failed");
    let mut rng = Rng::new(11);
    let c = ConvCfg::plain(2, 64, 300, 4, DType::F32, Kind::Cf, &mut rng);
    run_fwd(&c, &mut rng).unwrap();
    run_bwd(&c, &mut rng).unwrap();
}

#[test]
#[ignore = "GPU only: CCV1D_TEST_BACKEND=gpu cargo test --test gpu_faults -- --ignored"]
fn pool_limit_gives_out_of_memory_then_calls_work() {
    need_gpu();
    let name = "pool_limit_gives_out_of_memory_then_calls_work";
    if in_child(name, &[("CCV1D_GPU_POOL_LIMIT_BYTES", "1")]).is_some() {
        return;
    }
    assert_eq!(std::env::var("CCV1D_GPU_POOL_LIMIT_BYTES").as_deref(), Ok("1"));
    let mut rng = Rng::new(12);
    let (c, t) = plain_case(&mut rng, true);
    let mut q = t.bwd_params(&c);
    let mut need = 0usize;
    assert_eq!(unsafe { ccv1d_bwd_workspace_size(&q, &mut need) }, CCV1D_OK, "{}", last_error());
    assert!(need > 1, "this backward needs a workspace of {need} bytes: the cap of 1 byte cannot bite");
    let before: Vec<Vec<u8>> = t.outputs().iter().map(|(_, o)| o.snapshot()).collect();
    let st = unsafe { ccv1d_bwd(&q, null_mut()) };
    assert_eq!(st, CCV1D_ERR_OUT_OF_MEMORY, "{} {}", status_str(st), last_error());
    let msg = last_error();
    assert!(msg.contains("workspace") && msg.contains("CCV1D_GPU_POOL_LIMIT_BYTES"), "{msg}");
    assert_eq!(unsafe { ccv1d_synchronize(null_mut()) }, CCV1D_OK, "{}", last_error());
    t.download(&c);
    for (i, (name, o)) in t.outputs().iter().enumerate() {
        assert!(o.snapshot() == before[i], "{name} written by the failed call");
    }
    // The caller's own workspace is not capped; forward needs none.
    let mut ws = null_mut();
    assert_eq!(unsafe { ccv1d_malloc(&mut ws, need) }, CCV1D_OK);
    q.workspace = ws;
    q.workspace_size = need;
    expect_ok(unsafe { ccv1d_bwd(&q, null_mut()) }, "bwd with a caller workspace").unwrap();
    unsafe { ccv1d_free(ws) };
    run_fwd(&c, &mut rng).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Kernel faults

/// A forward whose x has 2 channels 2^40 bytes apart inside a 1 KiB allocation: valid to every
/// host-side check (the host cannot know allocation sizes), a fault in the kernel. The output
/// is allocated first so it lies below x's (huge) byte range and the overlap check passes.
struct Faulting {
    out: *mut c_void,
    x: *mut c_void,
    w: *mut c_void,
}

impl Faulting {
    fn new() -> Faulting {
        let alloc = |n: usize| {
            let mut p = null_mut();
            assert_eq!(unsafe { ccv1d_malloc(&mut p, n) }, CCV1D_OK, "{}", last_error());
            p
        };
        let (a, b, w) = (alloc(1024), alloc(1024), alloc(1024));
        let (out, x) = if (a as usize) < (b as usize) { (a, b) } else { (b, a) };
        Faulting { out, x, w }
    }
    fn params(&self) -> ccv1d_fwd_params {
        let mut p = fwd_params_base(1, 2, 16, 4, false);
        p.backend = CCV1D_BACKEND_GPU;
        p.x = ccv1d_tensor { data: self.x, dtype: CCV1D_DTYPE_F32, stride: [0, 1 << 38, 1] };
        p.weight = ccv1d_tensor { data: self.w, dtype: CCV1D_DTYPE_F32, stride: [4, 1, 0] };
        p.out = ccv1d_tensor { data: self.out, dtype: CCV1D_DTYPE_F32, stride: [32, 16, 1] };
        p
    }
}

/// After the fault: an allocation, a valid forward (on fresh allocations, when they can still
/// be made) and a synchronize must each answer an error or a correct result — never crash or
/// hang; the forward + synchronize and the last synchronize must answer an error (the context
/// is lost). Prints what each answered.
fn later_calls_fail() {
    let report = |what: &str, st: i32| {
        println!("after the fault: {what} -> {} {}", status_str(st), last_error());
        st
    };
    let mut p = null_mut();
    let st_malloc = report("ccv1d_malloc(4096)", unsafe { ccv1d_malloc(&mut p, 4096) });
    assert!(st_malloc != CCV1D_OK || !p.is_null(), "ccv1d_malloc answered OK without a pointer");
    let st_fwd = match Faulting::new_or_none() {
        Some(f) => {
            let mut q = f.params();
            q.x.stride = [32, 16, 1]; // a valid view this time
            match report("valid ccv1d_fwd", unsafe { ccv1d_fwd(&q, null_mut()) }) {
                CCV1D_OK => report("ccv1d_synchronize after it", unsafe { ccv1d_synchronize(null_mut()) }),
                s => s,
            }
        }
        None => {
            println!("after the fault: allocations fail ({})", last_error());
            CCV1D_ERR_DEVICE
        }
    };
    let st_sync = report("ccv1d_synchronize", unsafe { ccv1d_synchronize(null_mut()) });
    assert_ne!(st_fwd, CCV1D_OK, "a forward + synchronize after a fault must report an error");
    assert_ne!(st_sync, CCV1D_OK, "synchronize after a fault must report the lost context");
}

impl Faulting {
    /// Allocations after a fault may fail: None then.
    fn new_or_none() -> Option<Faulting> {
        let mut ps = [null_mut(); 3];
        for p in ps.iter_mut() {
            if unsafe { ccv1d_malloc(p, 1024) } != CCV1D_OK {
                return None;
            }
        }
        Some(Faulting { out: ps[0], x: ps[1], w: ps[2] })
    }
}

#[test]
#[ignore = "GPU only: CCV1D_TEST_BACKEND=gpu cargo test --test gpu_faults -- --ignored"]
fn kernel_fault_with_sync_check_is_device_naming_the_kernel() {
    need_gpu();
    if let Some(text) = in_child("kernel_fault_with_sync_check_is_device_naming_the_kernel", &[("CCV1D_SYNC_CHECK", "1")]) {
        assert!(text.contains("FAULT-STATUS DEVICE"), "{text}");
        return;
    }
    fault_then_later_calls();
}

#[test]
#[ignore = "GPU only: CCV1D_TEST_BACKEND=gpu cargo test --test gpu_faults -- --ignored"]
fn kernel_fault_is_device_at_the_next_synchronize() {
    need_gpu();
    if let Some(text) = in_child("kernel_fault_is_device_at_the_next_synchronize", &[("CCV1D_SYNC_CHECK", "0")]) {
        assert!(text.contains("FAULT-STATUS DEVICE"), "{text}");
        return;
    }
    fault_then_later_calls();
}

/// The child's part of the fault tests (the context is lost afterwards).
fn fault_then_later_calls() {
    let sync_check = std::env::var("CCV1D_SYNC_CHECK").as_deref() == Ok("1");
    // A healthy call first: the module is loaded and the context works.
    let mut rng = Rng::new(14);
    let c = ConvCfg::plain(1, 8, 32, 4, DType::F32, Kind::Cf, &mut rng);
    run_fwd(&c, &mut rng).unwrap();

    let f = Faulting::new();
    let p = f.params();
    let st = unsafe { ccv1d_fwd(&p, null_mut()) };
    let msg = last_error();
    println!("faulting ccv1d_fwd -> {} {msg}", status_str(st));
    let (st, msg) = if sync_check {
        assert_eq!(st, CCV1D_ERR_DEVICE, "CCV1D_SYNC_CHECK=1: the launch reports the fault: {msg}");
        assert!(msg.contains("kernel ccv1d_fwd"), "the message names the kernel: {msg}");
        (st, msg)
    } else {
        // Asynchronous: the launch itself succeeds; the fault shows at the next synchronize.
        assert_eq!(st, CCV1D_OK, "{msg}");
        let s = unsafe { ccv1d_synchronize(null_mut()) };
        let m = last_error();
        println!("ccv1d_synchronize after the faulting forward -> {} {m}", status_str(s));
        (s, m)
    };
    assert_eq!(st, CCV1D_ERR_DEVICE, "{msg}");
    assert!(msg.contains("ILLEGAL_ADDRESS") || msg.contains("illegal") || msg.contains("fault"), "{msg}");
    println!("FAULT-STATUS {}", status_str(st));
    later_calls_fail();
}
