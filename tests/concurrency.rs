//! Many callers at once: 16 threads, each with its own tensors, each making `CCV1D_CONC_CALLS`
//! (default 1000) calls that mix forward, backward (workspace NULL: the GPU pool) and decode
//! update, small and large (≥ 2^16 elements: the CPU backend's worker threads) problems, every
//! dtype and both layouts. The bits of every call's outputs must equal those of the same calls
//! made by a single thread, run first. Every 16th call or so is a deliberately invalid one whose
//! `ccv1d_last_error()` message names this thread's own value: it must still be this thread's
//! message after other threads' calls, and be empty after this thread's next successful call.
//!
//! `CCV1D_TEST_BACKEND=gpu` (CUDA): each thread uses its own non-blocking stream, created here
//! with the driver API (the library has no stream API: a caller brings its streams); the
//! reference runs on one stream. A second test runs in a fresh child process with the threaded
//! pass first (driver load, module load, pool creation and `CCV1D_NUM_THREADS` all racing).

use std::ffi::c_void;
use std::sync::{Arc, Barrier};

use causal_conv1d::capi::*;
use causal_conv1d::error::*;
use causal_conv1d::harness::{backend_code, last_error, on_gpu, status_str, Rng};
use causal_conv1d::params::*;

const THREADS: usize = 16;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
        Err(_) => default,
    }
}

// ---------------------------------------------------------------------------------------------
// Streams (GPU): the caller's part, done with the CUDA driver API directly.

mod cuda {
    use std::ffi::{c_void, CString};

    pub struct Streams {
        push: unsafe extern "C" fn(usize) -> i32,
        pop: unsafe extern "C" fn(*mut usize) -> i32,
        destroy: unsafe extern "C" fn(usize) -> i32,
        ctx: usize,
        pub list: Vec<usize>,
    }

    unsafe fn sym<T>(lib: *mut c_void, name: &str) -> T {
        let c = CString::new(name).unwrap();
        let p = libc::dlsym(lib, c.as_ptr());
        assert!(!p.is_null(), "libcuda.so.1 has no {name}");
        std::mem::transmute_copy(&p)
    }

    fn ok(r: i32, what: &str) {
        assert_eq!(r, 0, "CUDA {what} failed with CUresult {r}");
    }

    impl Streams {
        /// `n` non-blocking streams in device 0's primary context (the context the library and
        /// `ccv1d_malloc` use for a thread without one).
        pub fn new(n: usize) -> Streams {
            // SAFETY: dlopen/dlsym with valid C strings; the signatures are the CUDA driver API's.
            unsafe {
                let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
                assert!(!lib.is_null(), "CCV1D_TEST_BACKEND=gpu but libcuda.so.1 cannot be opened (the GPU variant needs CUDA)");
                let init: unsafe extern "C" fn(u32) -> i32 = sym(lib, "cuInit");
                let dev_get: unsafe extern "C" fn(*mut i32, i32) -> i32 = sym(lib, "cuDeviceGet");
                let retain: unsafe extern "C" fn(*mut usize, i32) -> i32 = sym(lib, "cuDevicePrimaryCtxRetain");
                let create: unsafe extern "C" fn(*mut usize, u32) -> i32 = sym(lib, "cuStreamCreate");
                let mut s = Streams {
                    push: sym(lib, "cuCtxPushCurrent_v2"),
                    pop: sym(lib, "cuCtxPopCurrent_v2"),
                    destroy: sym(lib, "cuStreamDestroy_v2"),
                    ctx: 0,
                    list: Vec::new(),
                };
                ok(init(0), "cuInit");
                let mut dev = 0;
                ok(dev_get(&mut dev, 0), "cuDeviceGet");
                ok(retain(&mut s.ctx, dev), "cuDevicePrimaryCtxRetain");
                ok((s.push)(s.ctx), "cuCtxPushCurrent");
                for _ in 0..n {
                    let mut st = 0usize;
                    ok(create(&mut st, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
                    s.list.push(st);
                }
                let mut c = 0;
                ok((s.pop)(&mut c), "cuCtxPopCurrent");
                s
            }
        }
    }

    impl Drop for Streams {
        fn drop(&mut self) {
            // SAFETY: streams created above in this context.
            unsafe {
                (self.push)(self.ctx);
                for &st in &self.list {
                    (self.destroy)(st);
                }
                let mut c = 0;
                (self.pop)(&mut c);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers: host bytes, plus device memory on the GPU (ordered on the caller's stream).

struct Buf {
    host: Vec<u8>,
    dev: *mut c_void,
}

impl Buf {
    fn new(bytes: Vec<u8>, stream: usize) -> Buf {
        let mut b = Buf { host: bytes, dev: std::ptr::null_mut() };
        if on_gpu() {
            ok(unsafe { ccv1d_malloc(&mut b.dev, b.host.len()) }, "ccv1d_malloc");
            ok(unsafe { ccv1d_memcpy(b.dev, b.host.as_ptr() as *const c_void, b.host.len(), stream as *mut c_void) }, "upload");
            ok(unsafe { ccv1d_synchronize(stream as *mut c_void) }, "upload sync");
        }
        b
    }
    fn ptr(&mut self) -> *mut c_void {
        if self.dev.is_null() {
            self.host.as_mut_ptr() as *mut c_void
        } else {
            self.dev
        }
    }
    /// The current bytes (downloaded from the device first on the GPU).
    fn bytes(&mut self, stream: usize) -> &[u8] {
        if !self.dev.is_null() {
            ok(unsafe { ccv1d_memcpy(self.host.as_mut_ptr() as *mut c_void, self.dev, self.host.len(), stream as *mut c_void) }, "download");
            ok(unsafe { ccv1d_synchronize(stream as *mut c_void) }, "download sync");
        }
        &self.host
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if !self.dev.is_null() {
            unsafe { ccv1d_free(self.dev) };
        }
    }
}

fn ok(st: i32, what: &str) {
    assert_eq!(st, CCV1D_OK, "{what}: {} {}", status_str(st), last_error());
}

fn dtype_size(dt: i32) -> usize {
    if dt == CCV1D_DTYPE_F32 {
        4
    } else {
        2
    }
}

/// `n` random values in ±[0.1, 1) stored as `dt`.
fn random_bytes(rng: &mut Rng, dt: i32, n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n * dtype_size(dt));
    for _ in 0..n {
        let x = rng.value() as f32;
        match dt {
            CCV1D_DTYPE_F32 => v.extend_from_slice(&x.to_le_bytes()),
            CCV1D_DTYPE_F16 => v.extend_from_slice(&half::f16::from_f32(x).to_le_bytes()),
            _ => v.extend_from_slice(&half::bf16::from_f32(x).to_le_bytes()),
        }
    }
    v
}

fn t(b: &mut Buf, dtype: i32, stride: [i64; 3]) -> ccv1d_tensor {
    ccv1d_tensor { data: b.ptr(), dtype, stride }
}

// ---------------------------------------------------------------------------------------------
// One thread's program

/// A forward/backward problem and its buffers (inputs fixed, outputs overwritten by each call).
struct Conv {
    b: i64,
    d: i64,
    l: i64,
    w: i64,
    dt: i32,
    channel_last: bool,
    x: Buf,
    weight: Buf,
    bias: Buf,
    init: Buf,
    dout: Buf,
    dfin: Buf,
    out: Buf,
    fin: Buf,
    dx: Buf,
    dweight: Buf,
    dbias: Buf,
    dinit: Buf,
}

impl Conv {
    fn new(rng: &mut Rng, b: i64, d: i64, l: i64, w: i64, dt: i32, channel_last: bool, stream: usize) -> Conv {
        let k = w - 1;
        let (nx, ns, es) = ((b * d * l) as usize, (b * d * k) as usize, dtype_size(dt));
        let mut r = |n: usize| Buf::new(random_bytes(rng, dt, n), stream);
        let (x, weight, bias, init, dout, dfin) = (r(nx), r((d * w) as usize), r(d as usize), r(ns), r(nx), r(ns));
        let z = |n: usize| Buf::new(vec![0u8; n], stream);
        Conv {
            b,
            d,
            l,
            w,
            dt,
            channel_last,
            x,
            weight,
            bias,
            init,
            dout,
            dfin,
            out: z(nx * es),
            fin: z(ns * es),
            dx: z(nx * es),
            dweight: z((d * w) as usize * 4),
            dbias: z(d as usize * 4),
            dinit: z(ns * es),
        }
    }
    fn xs(&self) -> [i64; 3] {
        let (d, l) = (self.d, self.l);
        if self.channel_last {
            [l * d, 1, d]
        } else {
            [d * l, l, 1]
        }
    }
    fn ss(&self) -> [i64; 3] {
        let k = self.w - 1;
        [self.d * k, k, 1]
    }

    fn fwd(&mut self, silu: bool, stream: usize, h: &mut Hasher) -> i32 {
        let (xs, ss, dt, w) = (self.xs(), self.ss(), self.dt, self.w);
        let p = ccv1d_fwd_params {
            struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
            backend: backend_code(),
            activation: if silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: self.b,
            dim: self.d,
            seqlen: self.l,
            width: w,
            x: t(&mut self.x, dt, xs),
            weight: t(&mut self.weight, dt, [w, 1, 0]),
            bias: t(&mut self.bias, dt, [1, 0, 0]),
            out: t(&mut self.out, dt, xs),
            seq_idx: ccv1d_tensor::default(),
            initial_states: t(&mut self.init, dt, ss),
            final_states: t(&mut self.fin, dt, ss),
            cu_seqlens: ccv1d_tensor::default(),
            state_indices: ccv1d_tensor::default(),
            has_initial_state: ccv1d_tensor::default(),
            num_seqs: 0,
            num_state_slots: 0,
        };
        let st = unsafe { ccv1d_fwd(&p, stream as *mut c_void) };
        if st == CCV1D_OK {
            h.add(self.out.bytes(stream));
            h.add(self.fin.bytes(stream));
        }
        st
    }

    fn bwd(&mut self, silu: bool, stream: usize, h: &mut Hasher) -> i32 {
        let (xs, ss, dt, w) = (self.xs(), self.ss(), self.dt, self.w);
        let p = ccv1d_bwd_params {
            struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
            backend: backend_code(),
            activation: if silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: self.b,
            dim: self.d,
            seqlen: self.l,
            width: w,
            x: t(&mut self.x, dt, xs),
            weight: t(&mut self.weight, dt, [w, 1, 0]),
            bias: t(&mut self.bias, dt, [1, 0, 0]),
            seq_idx: ccv1d_tensor::default(),
            initial_states: t(&mut self.init, dt, ss),
            cu_seqlens: ccv1d_tensor::default(),
            state_indices: ccv1d_tensor::default(),
            has_initial_state: ccv1d_tensor::default(),
            num_seqs: 0,
            num_state_slots: 0,
            dout: t(&mut self.dout, dt, xs),
            dfinal_states: t(&mut self.dfin, dt, ss),
            dx: t(&mut self.dx, dt, xs),
            dweight: t(&mut self.dweight, CCV1D_DTYPE_F32, [w, 1, 0]),
            dbias: t(&mut self.dbias, CCV1D_DTYPE_F32, [1, 0, 0]),
            dinitial_states: t(&mut self.dinit, dt, ss),
            // NULL: the GPU backend takes its scratch from the library's stream-ordered pool.
            workspace: std::ptr::null_mut(),
            workspace_size: 0,
            nondeterministic: 0,
        };
        let st = unsafe { ccv1d_bwd(&p, stream as *mut c_void) };
        if st == CCV1D_OK {
            for b in [&mut self.dx, &mut self.dweight, &mut self.dbias, &mut self.dinit] {
                h.add(b.bytes(stream));
            }
        }
        st
    }

    /// An invalid forward (width out of range) whose message carries `tag`.
    fn bad_fwd(&mut self, tag: i64) -> i32 {
        let (xs, dt) = (self.xs(), self.dt);
        let p = ccv1d_fwd_params {
            struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
            backend: backend_code(),
            activation: CCV1D_ACT_NONE,
            batch: self.b,
            dim: self.d,
            seqlen: self.l,
            width: tag,
            x: t(&mut self.x, dt, xs),
            weight: t(&mut self.weight, dt, [8, 1, 0]),
            bias: ccv1d_tensor::default(),
            out: t(&mut self.out, dt, xs),
            seq_idx: ccv1d_tensor::default(),
            initial_states: ccv1d_tensor::default(),
            final_states: ccv1d_tensor::default(),
            cu_seqlens: ccv1d_tensor::default(),
            state_indices: ccv1d_tensor::default(),
            has_initial_state: ccv1d_tensor::default(),
            num_seqs: 0,
            num_state_slots: 0,
        };
        unsafe { ccv1d_fwd(&p, std::ptr::null_mut()) }
    }
}

/// Decode state of one thread: conv_state evolves from call to call (a circular buffer).
struct Decode {
    b: i64,
    d: i64,
    w: i64,
    state_len: i64,
    dt: i32,
    x: Buf,
    weight: Buf,
    bias: Buf,
    state: Buf,
    cache: Buf,
    out: Buf,
}

impl Decode {
    fn new(rng: &mut Rng, b: i64, d: i64, w: i64, dt: i32, stream: usize) -> Decode {
        let state_len = w - 1 + 3;
        let mut r = |n: i64| Buf::new(random_bytes(rng, dt, n as usize), stream);
        let (x, weight, bias, state) = (r(b * d), r(d * w), r(d), r(b * d * state_len));
        let cache: Vec<u8> = (0..b).flat_map(|i| (i as i32 * 5 + 1).to_le_bytes()).collect();
        Decode {
            b,
            d,
            w,
            state_len,
            dt,
            x,
            weight,
            bias,
            state,
            cache: Buf::new(cache, stream),
            out: Buf::new(vec![0u8; (b * d) as usize * dtype_size(dt)], stream),
        }
    }

    fn update(&mut self, silu: bool, stream: usize, h: &mut Hasher) -> i32 {
        let (d, w, sl, dt) = (self.d, self.w, self.state_len, self.dt);
        let p = ccv1d_update_params {
            struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
            backend: backend_code(),
            activation: if silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: self.b,
            dim: d,
            seqlen: 1,
            width: w,
            state_len: sl,
            num_state_slots: 0,
            x: t(&mut self.x, dt, [d, 1, 1]),
            weight: t(&mut self.weight, dt, [w, 1, 0]),
            bias: t(&mut self.bias, dt, [1, 0, 0]),
            out: t(&mut self.out, dt, [d, 1, 1]),
            conv_state: t(&mut self.state, dt, [d * sl, sl, 1]),
            cache_seqlens: t(&mut self.cache, CCV1D_DTYPE_I32, [1, 0, 0]),
            conv_state_indices: ccv1d_tensor::default(),
        };
        let st = unsafe { ccv1d_update(&p, stream as *mut c_void) };
        if st == CCV1D_OK {
            h.add(self.out.bytes(stream));
            h.add(self.state.bytes(stream));
        }
        st
    }
}

struct Hasher(u64);
impl Hasher {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// Thread `id`'s calls (its own shapes, dtype and layout, from `seed`), on `stream`: one hash of
/// the outputs' bits per call (the status for the invalid calls). Panics on an unexpected status
/// or a last-error message that is not this thread's.
fn program(id: usize, seed: u64, calls: usize, stream: usize, start: Option<&Barrier>) -> Vec<u64> {
    let mut rng = Rng::new(seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let dt = [CCV1D_DTYPE_F32, CCV1D_DTYPE_F16, CCV1D_DTYPE_BF16][id % 3];
    let cl = id % 2 == 1;
    let w = 2 + (id % 7) as i64;
    // Small: the calling thread alone. Large (2^16 elements): the CPU backend's worker threads.
    let mut small = Conv::new(&mut rng, 2, 16 + id as i64, 40, w, dt, cl, stream);
    let mut large = Conv::new(&mut rng, 2, 64, 512, w, dt, !cl, stream);
    let mut dec = Decode::new(&mut rng, 3, 24 + id as i64, w, dt, stream);
    let tag = 100 + id as i64;
    let my_error = format!("width is {tag}, must be 1..=8");
    let mut pending_error = false;
    let mut hashes = Vec::with_capacity(calls);
    if let Some(b) = start {
        b.wait();
    }
    for i in 0..calls {
        if pending_error {
            // Other threads have made calls since; this thread's message must be intact.
            assert_eq!(last_error(), my_error, "thread {id} call {i}: last error changed by another thread");
        }
        let mut h = Hasher(0xcbf2_9ce4_8422_2325);
        let silu = rng.chance(0.5);
        let pick = rng.below(32);
        let st = match pick {
            0 | 1 => {
                let st = small.bad_fwd(tag);
                assert_eq!(st, CCV1D_ERR_WIDTH, "thread {id} call {i}: invalid width accepted");
                assert_eq!(last_error(), my_error, "thread {id} call {i}");
                pending_error = true;
                hashes.push(st as u64);
                continue;
            }
            2 => large.fwd(silu, stream, &mut h),
            3 => large.bwd(silu, stream, &mut h),
            4..=12 => small.fwd(silu, stream, &mut h),
            13..=21 => small.bwd(silu, stream, &mut h),
            _ => dec.update(silu, stream, &mut h),
        };
        assert_eq!(st, CCV1D_OK, "thread {id} call {i} (op {pick}): {} {}", status_str(st), last_error());
        assert_eq!(last_error(), "", "thread {id} call {i}: a successful call leaves an empty message");
        pending_error = false;
        hashes.push(h.0);
    }
    hashes
}

/// The threaded pass and the single-threaded reference, in the given order; every call's hash
/// must agree.
fn check(threaded_first: bool, calls: usize) {
    let seed = match std::env::var("CCV1D_TEST_SEED") {
        Ok(s) => causal_conv1d::harness::parse_u64(&s).expect("CCV1D_TEST_SEED"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    };
    let streams = on_gpu().then(|| cuda::Streams::new(THREADS));
    let stream_of = |i: usize| streams.as_ref().map_or(0, |s| s.list[i]);
    let reference = || -> (Vec<Vec<u64>>, f64) {
        let t0 = std::time::Instant::now();
        let r = (0..THREADS).map(|id| program(id, seed, calls, stream_of(0), None)).collect();
        (r, t0.elapsed().as_secs_f64())
    };
    let threaded = || -> (Vec<Vec<u64>>, f64) {
        let t0 = std::time::Instant::now();
        let barrier = Arc::new(Barrier::new(THREADS));
        let r = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|id| {
                    let (b, st) = (barrier.clone(), stream_of(id));
                    s.spawn(move || program(id, seed, calls, st, Some(&b)))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| panic!("a caller thread panicked (seed {seed})"))).collect()
        });
        (r, t0.elapsed().as_secs_f64())
    };
    let ((want, t_ref), (got, t_thr)) = if threaded_first {
        let g = threaded();
        (reference(), g)
    } else {
        let w = reference();
        (w, threaded())
    };
    println!(
        "concurrency: {THREADS} threads x {calls} calls, backend {}, CPU worker threads {}: single-threaded {t_ref:.2} s, threaded {t_thr:.2} s (seed {seed})",
        if on_gpu() { "gpu (one stream per thread)" } else { "cpu" },
        causal_conv1d::cpu::num_threads()
    );
    for id in 0..THREADS {
        if let Some(i) = (0..calls).find(|&i| got[id][i] != want[id][i]) {
            panic!("thread {id} call {i}: outputs differ from the single-threaded run (CCV1D_TEST_SEED={seed})");
        }
    }
}

#[test]
fn sixteen_threads_match_a_single_thread() {
    check(false, env_usize("CCV1D_CONC_CALLS", 1000));
}

/// The threaded pass first, in a fresh process with 4 CPU worker threads: the first calls of 16
/// threads race to open the driver, load the module, create the pool and read `CCV1D_NUM_THREADS`.
#[test]
fn cold_start_race_matches_a_single_thread() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(&exe)
        .args(["--ignored", "--exact", "cold_start_child", "--nocapture", "--test-threads=1"])
        .env("CCV1D_NUM_THREADS", "4")
        .output()
        .expect("run the child test process");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{}", text.lines().filter_map(|l| l.find("concurrency:").map(|i| &l[i..])).collect::<Vec<_>>().join("\n"));
    assert!(out.status.success() && text.contains("concurrency:"), "child failed:\n{text}");
}

#[test]
#[ignore = "child process of cold_start_race_matches_a_single_thread"]
fn cold_start_child() {
    check(true, 64);
}
