//! GPU self-test of the kernels and their launch geometry, independent of the driver layer:
//! a minimal CUDA driver-API shim (dlopen libcuda.so.1), the embedded fatbin, random inputs in
//! strided / padded / misaligned views, NaN-poisoned outputs, and an f64 reference written from
//! docs/semantics.md. Every buffer is compared whole: elements outside the views (padding,
//! untouched state slots) must keep their poison.
//!
//! Needs an NVIDIA GPU and a build with nvcc (cfg ccv1d_cuda). Run on the GPU machine:
//!     cargo test --lib gpu::kernels::gputest -- --ignored --test-threads=1
//! (or the test executable with `gputest --ignored`). CCV1D_GPUTEST_VERBOSE=1 prints every case.

use super::*;
use crate::gpu::launch::Vendor;
use half::{bf16, f16};
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;

// ------------------------------------------------------------------ driver shim

type Fn0 = unsafe extern "C" fn(u32) -> i32;
struct Cu {
    ctx: *mut c_void,
    module: *mut c_void,
    dev_info: DeviceInfo,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> i32,
    mem_free: unsafe extern "C" fn(u64) -> i32,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> i32,
    dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> i32,
    get_fn: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const i8) -> i32,
    launch: unsafe extern "C" fn(*mut c_void, u32, u32, u32, u32, u32, u32, u32, *mut c_void, *mut *mut c_void, *mut *mut c_void) -> i32,
    sync: unsafe extern "C" fn() -> i32,
    set_current: unsafe extern "C" fn(*mut c_void) -> i32,
    err_name: unsafe extern "C" fn(i32, *mut *const i8) -> i32,
}
unsafe impl Send for Cu {}

static CU: Mutex<Option<Cu>> = Mutex::new(None);

unsafe fn sym<T>(lib: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    let p = libc::dlsym(lib, c.as_ptr());
    assert!(!p.is_null(), "libcuda has no {name}");
    std::mem::transmute_copy(&p)
}

impl Cu {
    fn open() -> Cu {
        unsafe {
            let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW);
            assert!(!lib.is_null(), "cannot dlopen libcuda.so.1 (no NVIDIA driver?)");
            let init: Fn0 = sym(lib, "cuInit");
            let dev_get: unsafe extern "C" fn(*mut i32, i32) -> i32 = sym(lib, "cuDeviceGet");
            let attr: unsafe extern "C" fn(*mut i32, i32, i32) -> i32 = sym(lib, "cuDeviceGetAttribute");
            let retain: unsafe extern "C" fn(*mut *mut c_void, i32) -> i32 = sym(lib, "cuDevicePrimaryCtxRetain");
            let load: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> i32 = sym(lib, "cuModuleLoadData");
            let mut cu = Cu {
                ctx: std::ptr::null_mut(),
                module: std::ptr::null_mut(),
                dev_info: DeviceInfo { vendor: Vendor::Nvidia, warp_size: 32, multiprocessors: 1, max_threads_per_block: 1024, max_shared_mem_per_block: 49152, arch: 0, mem_gbps: 0 },
                mem_alloc: sym(lib, "cuMemAlloc_v2"),
                mem_free: sym(lib, "cuMemFree_v2"),
                htod: sym(lib, "cuMemcpyHtoD_v2"),
                dtoh: sym(lib, "cuMemcpyDtoH_v2"),
                get_fn: sym(lib, "cuModuleGetFunction"),
                launch: sym(lib, "cuLaunchKernel"),
                sync: sym(lib, "cuCtxSynchronize"),
                set_current: sym(lib, "cuCtxSetCurrent"),
                err_name: sym(lib, "cuGetErrorName"),
            };
            cu.check(init(0), "cuInit");
            let mut dev = 0;
            cu.check(dev_get(&mut dev, 0), "cuDeviceGet");
            let mut v = 0;
            cu.check(attr(&mut v, 16, dev), "SM count");
            cu.dev_info.multiprocessors = v as u32;
            cu.check(attr(&mut v, 10, dev), "warp size");
            cu.dev_info.warp_size = v as u32;
            let (mut ma, mut mi) = (0, 0);
            cu.check(attr(&mut ma, 75, dev), "cc major");
            cu.check(attr(&mut mi, 76, dev), "cc minor");
            cu.dev_info.arch = (ma * 10 + mi) as u32;
            let (mut clock, mut bus) = (0, 0);
            cu.check(attr(&mut clock, 36, dev), "memory clock");
            cu.check(attr(&mut bus, 37, dev), "memory bus width");
            cu.dev_info.mem_gbps = crate::gpu::launch::peak_mem_gbps(clock, bus);
            let mut ctx = std::ptr::null_mut();
            cu.check(retain(&mut ctx, dev), "cuDevicePrimaryCtxRetain");
            cu.ctx = ctx;
            cu.check((cu.set_current)(cu.ctx), "cuCtxSetCurrent");
            // CCV1D_GPUTEST_IMAGE: a tuning image (tests/gpu/build_variants.sh) instead of the embedded one
            let file = std::env::var_os("CCV1D_GPUTEST_IMAGE").map(|p| std::fs::read(&p).unwrap_or_else(|e| panic!("CCV1D_GPUTEST_IMAGE {p:?}: {e}")));
            let bytes: &[u8] = file.as_deref().unwrap_or(include_bytes!(env!("CCV1D_FATBIN")));
            let mut aligned = vec![0u64; bytes.len() / 8 + 1];
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), aligned.as_mut_ptr() as *mut u8, bytes.len());
            let mut module = std::ptr::null_mut();
            cu.check(load(&mut module, aligned.as_ptr() as *const c_void), "cuModuleLoadData");
            cu.module = module;
            cu
        }
    }
    fn check(&self, r: i32, what: &str) {
        if r != 0 {
            let mut p: *const i8 = std::ptr::null();
            unsafe { (self.err_name)(r, &mut p) };
            let n = if p.is_null() { "?".into() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().to_string() };
            panic!("{what}: CUDA error {r} ({n})");
        }
    }
    fn alloc(&self, bytes: usize) -> u64 {
        let mut p = 0u64;
        self.check(unsafe { (self.mem_alloc)(&mut p, bytes.max(16)) }, "cuMemAlloc");
        p
    }
    fn upload(&self, d: u64, b: &[u8]) {
        self.check(unsafe { (self.htod)(d, b.as_ptr() as *const c_void, b.len()) }, "cuMemcpyHtoD");
    }
    fn download(&self, d: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.check(unsafe { (self.dtoh)(v.as_mut_ptr() as *mut c_void, d, n) }, "cuMemcpyDtoH");
        v
    }
    fn run(&self, launches: &[Launch]) {
        for l in launches {
            let name = CString::new(l.kernel.clone()).unwrap();
            let mut f = std::ptr::null_mut();
            self.check(unsafe { (self.get_fn)(&mut f, self.module, name.as_ptr()) }, &format!("cuModuleGetFunction {}", l.kernel));
            let mut params = l.params.clone();
            let mut args = [params.as_mut_ptr() as *mut c_void];
            let r = unsafe {
                (self.launch)(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_mem_bytes, std::ptr::null_mut(), args.as_mut_ptr(), std::ptr::null_mut())
            };
            self.check(r, &format!("launch {}", l.kernel));
            self.check(unsafe { (self.sync)() }, &format!("run {}", l.kernel));
        }
    }
}

fn with_gpu<R>(f: impl FnOnce(&Cu) -> R) -> R {
    let mut g = CU.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        *g = Some(Cu::open());
    }
    let cu = g.as_ref().unwrap();
    cu.check(unsafe { (cu.set_current)(cu.ctx) }, "cuCtxSetCurrent");
    f(cu)
}

// ------------------------------------------------------------------ host data

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unif(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

fn round_to(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
    }
}
fn encode(dt: DType, v: &[f64]) -> Vec<u8> {
    let mut o = Vec::with_capacity(v.len() * dt.size());
    for &x in v {
        match dt {
            DType::F32 => o.extend_from_slice(&(x as f32).to_le_bytes()),
            DType::F16 => o.extend_from_slice(&f16::from_f64(x).to_bits().to_le_bytes()),
            DType::BF16 => o.extend_from_slice(&bf16::from_f64(x).to_bits().to_le_bytes()),
        }
    }
    o
}
fn decode(dt: DType, b: &[u8]) -> Vec<f64> {
    match dt {
        DType::F32 => b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::F16 => b.chunks(2).map(|c| f16::from_bits(u16::from_le_bytes(c.try_into().unwrap())).to_f64()).collect(),
        DType::BF16 => b.chunks(2).map(|c| bf16::from_bits(u16::from_le_bytes(c.try_into().unwrap())).to_f64()).collect(),
    }
}

/// A float tensor in its own device buffer: logical shape, strides, element offset; `host` holds
/// the whole buffer (values already rounded to the dtype).
struct T3 {
    dt: DType,
    #[allow(dead_code)]
    shape: [usize; 3],
    stride: [i64; 3],
    off: usize,
    host: Vec<f64>,
    dev: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lay {
    Cf,
    Cl,
    /// channel-first rows padded (a slice of a wider tensor), 16-byte aligned
    CfPad,
    /// channel-last with padded rows
    ClPad,
    /// element stride 2 along L, misaligned base: scalar path
    Odd,
    /// misaligned base (2-element offset), otherwise contiguous channel-first
    CfMis,
    /// channel-last rows of D + 1 elements from a 1-element offset: off the vector path
    ClOdd,
}

fn strides_for(shape: [usize; 3], lay: Lay) -> ([i64; 3], usize) {
    let [a, b, c] = shape.map(|v| v as i64);
    let (s, off) = match lay {
        Lay::Cf => ([b * c, c, 1], 0),
        Lay::Cl => ([b * c, 1, b], 0),
        Lay::CfPad => {
            let row = c + 8;
            ([b * row + 16, row, 1], 8)
        }
        Lay::ClPad => {
            let row = b + 8;
            ([c * row + 8, 1, row], 8)
        }
        Lay::Odd => ([b * c * 2 + 3, c * 2, 2], 3),
        Lay::CfMis => ([b * c, c, 1], 2),
        Lay::ClOdd => ([c * (b + 1) + 1, 1, b + 1], 1),
    };
    let _ = a;
    (s, off)
}

impl T3 {
    fn extent(shape: [usize; 3], stride: [i64; 3], off: usize) -> usize {
        let mut m = off as i64;
        for i in 0..3 {
            if shape[i] > 0 {
                m += (shape[i] as i64 - 1) * stride[i];
            }
        }
        m as usize + 1 + 8
    }
    fn new(cu: &Cu, dt: DType, shape: [usize; 3], stride: [i64; 3], off: usize, fill: impl FnMut() -> f64) -> T3 {
        let n = Self::extent(shape, stride, off);
        let mut fill = fill;
        let host: Vec<f64> = (0..n).map(|_| round_to(dt, fill())).collect();
        let dev = cu.alloc(n * dt.size());
        cu.upload(dev, &encode(dt, &host));
        T3 { dt, shape, stride, off, host, dev }
    }
    fn idx(&self, i: usize, j: usize, k: usize) -> usize {
        (self.off as i64 + i as i64 * self.stride[0] + j as i64 * self.stride[1] + k as i64 * self.stride[2]) as usize
    }
    fn at(&self, i: usize, j: usize, k: usize) -> f64 {
        self.host[self.idx(i, j, k)]
    }
    fn view(&self) -> View {
        View { addr: (self.dev + (self.off * self.dt.size()) as u64) as usize, dtype: self.dt, stride: self.stride }
    }
    fn read(&self, cu: &Cu) -> Vec<f64> {
        decode(self.dt, &cu.download(self.dev, self.host.len() * self.dt.size()))
    }
    fn free(&self, cu: &Cu) {
        unsafe { (cu.mem_free)(self.dev) };
    }
}

struct I32 {
    v: Vec<i32>,
    dev: u64,
}
impl I32 {
    fn new(cu: &Cu, v: Vec<i32>) -> I32 {
        let dev = cu.alloc(v.len() * 4 + 16);
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        cu.upload(dev, &b);
        I32 { v, dev }
    }
    fn view(&self, stride0: i64, stride1: i64) -> IdxView {
        IdxView { addr: self.dev as usize, stride: [stride0, stride1], elem_bytes: 4 }
    }
}

fn nan() -> f64 {
    f64::NAN
}

/// Compares whole buffers: NaN where the reference is NaN (poison kept), close elsewhere.
fn compare(what: &str, got: &[f64], want: &[f64], dt: DType, scale_tol: f64) -> (f64, f64) {
    assert_eq!(got.len(), want.len());
    let (mut num, mut den, mut maxe, mut maxr) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}: element {i} outside the output was written ({g})");
            continue;
        }
        assert!(g.is_finite(), "{what}: element {i} not written or not finite ({g}, want {w})");
        num += (g - w) * (g - w);
        den += w * w;
        maxe = maxe.max((g - w).abs());
        maxr = maxr.max(w.abs());
    }
    let rel = (num / den.max(1e-30)).sqrt();
    let tol = scale_tol
        * match dt {
            DType::F32 => 2e-6,
            DType::F16 => 1.5e-3,
            DType::BF16 => 1e-2,
        };
    assert!(rel <= tol || den < 1e-20 && maxe < 1e-6, "{what}: relative error {rel:.3e} > {tol:.1e} (max abs {maxe:.3e}, max |ref| {maxr:.3e})");
    assert!(maxe <= 8.0 * tol * maxr.max(1e-3) + 1e-6, "{what}: max abs error {maxe:.3e} (max |ref| {maxr:.3e}, rel {rel:.3e})");
    (rel, maxe)
}

fn verbose() -> bool {
    std::env::var("CCV1D_GPUTEST_VERBOSE").is_ok()
}

// ------------------------------------------------------------------ reference (docs/semantics.md)

#[derive(Clone, Debug)]
struct SeqR {
    b: usize,
    s: usize,
    e: usize,
    slot: i64,
    skip: bool,
    init: bool,
    /// has_initial_state (true when not given)
    hin: bool,
}

fn silu(z: f64) -> f64 {
    z / (1.0 + (-z).exp())
}
fn silu_d(z: f64) -> f64 {
    let s = 1.0 / (1.0 + (-z).exp());
    s * (1.0 + z * (1.0 - s))
}

/// Everything a forward/backward case holds on the host and device.
struct Conv {
    dt: DType,
    b: usize,
    d: usize,
    l: usize,
    w: usize,
    silu: bool,
    x: T3,
    weight: T3,
    bias: Option<T3>,
    seq: Option<I32>,
    cu: Option<I32>,
    si: Option<I32>,
    hi: Option<(I32, u64, Vec<u8>)>, // (int32 version, bool buffer, bool values) — one is used
    hi_bool: bool,
    init: Option<T3>,
    num_slots: usize,
    seqs: Vec<SeqR>,
}

impl Conv {
    /// GPU rule: a slot >= num_slots skips its sequence when some state tensor exists (without
    /// state tensors only slot < 0 skips).
    fn set_states_any(&mut self, any: bool) {
        let init = self.init.is_some();
        for r in &mut self.seqs {
            r.skip = r.slot < 0 || (any && r.slot >= self.num_slots as i64);
            r.init = !r.skip && init && r.hin;
        }
    }
    fn k(&self) -> usize {
        self.w - 1
    }
    fn wt(&self, d: usize, k: usize) -> f64 {
        self.weight.at(d, k, 0)
    }
    fn bias(&self, d: usize) -> f64 {
        self.bias.as_ref().map(|b| b.at(d, 0, 0)).unwrap_or(0.0)
    }
    /// id(t) for local position t (t may be negative) of sequence r
    fn id(&self, r: &SeqR, t: i64) -> i64 {
        match &self.seq {
            None => 0,
            Some(s) => {
                let tt = if t < 0 { 0 } else { t as usize };
                s.v[r.b * self.l + r.s + tt] as i64
            }
        }
    }
    fn xe(&self, r: &SeqR, d: usize, t: i64) -> f64 {
        let k = self.k() as i64;
        if t >= 0 {
            self.x.at(r.b, d, r.s + t as usize)
        } else if r.init {
            self.init.as_ref().unwrap().at(r.slot as usize, d, (t + k) as usize)
        } else {
            0.0
        }
    }
    fn pre(&self, r: &SeqR, d: usize, t: i64) -> f64 {
        let k = self.k() as i64;
        let mut acc = self.bias(d);
        for j in 0..self.w as i64 {
            let p = t - k + j;
            if self.id(r, p) == self.id(r, t) {
                acc += self.wt(d, j as usize) * self.xe(r, d, p);
            }
        }
        acc
    }
    fn final_cond(&self, r: &SeqR, p: i64) -> bool {
        let len = (r.e - r.s) as i64;
        if self.seq.is_none() || len == 0 {
            return true;
        }
        let idl = self.id(r, len - 1);
        idl >= 0 && self.id(r, p) == idl
    }
}

struct ConvOpts {
    dt: DType,
    wdt: DType,
    bdt: Option<DType>,
    b: usize,
    d: usize,
    l: usize,
    w: usize,
    silu: bool,
    lay: Lay,
    seq_idx: bool,
    init: bool,
    /// packed: sequence lengths (sum = l, batch must be 1)
    packed: Option<Vec<usize>>,
    /// state_indices (one per sequence), may hold -1 and out-of-range slots
    state_idx: Option<Vec<i32>>,
    has_init: Option<(Vec<i32>, bool)>,
    num_slots: usize,
    seed: u64,
    /// weight as whole contiguous rows [D, W] and a contiguous bias (vector weight loads where a
    /// kernel has them); otherwise padded rows and a stride-2 bias
    w_rows: bool,
    /// a pre-activation past the fp32 range: weights 4 in every other channel, x = ±1e38 at two
    /// tokens of its rows (the SiLU backward's path for z = ±inf; x must be bf16 or f32; at most
    /// 3 rows, so that a channel's dweight stays finite in fp32)
    saturate: bool,
}

fn build_conv(cu: &Cu, o: &ConvOpts) -> Conv {
    let mut rng = Rng(o.seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let (st, off) = strides_for([o.b, o.d, o.l], o.lay);
    let x = T3::new(cu, o.dt, [o.b, o.d, o.l], st, off, || rng.unif());
    let mut rng2 = Rng(o.seed ^ 0x1234567 | 1);
    let (w_row, b_step, b_off) = if o.w_rows { (o.w as i64, 1, 0) } else { (o.w as i64 + 1, 2, 1) };
    let mut weight = T3::new(cu, o.wdt, [o.d, o.w, 1], [w_row, 1, 0], 0, || rng2.unif() * 0.6);
    let mut x = x;
    if o.saturate {
        // z = 4 (±1e38) + ... overflows fp32 (not f64: the reference stays finite) in the W
        // windows holding such a token; two tokens of a row at least W apart. dweight takes one
        // term g x of about 1e38 |dout| a row
        assert!(o.dt != DType::F16 && o.l >= 2 * o.w && o.b <= 3, "saturate: bf16 or f32 x, rows of 2W tokens, B <= 3");
        for d in (0..o.d).step_by(2) {
            for j in 0..o.w {
                let i = weight.idx(d, j, 0);
                weight.host[i] = 4.0;
            }
            for b in 0..o.b {
                let t = (3 * d + b) % (o.l - o.w);
                let (i, k) = (x.idx(b, d, t), x.idx(b, d, (t + o.l / 2) % o.l));
                x.host[i] = round_to(o.dt, 1e38);
                x.host[k] = round_to(o.dt, -1e38);
            }
        }
        cu.upload(weight.dev, &encode(o.wdt, &weight.host));
        cu.upload(x.dev, &encode(o.dt, &x.host));
    }
    let bias = o.bdt.map(|bdt| T3::new(cu, bdt, [o.d, 1, 1], [b_step, 0, 0], b_off, || rng2.unif() * 0.5));
    let k = o.w - 1;
    let seq = if o.seq_idx {
        // non-decreasing ids with a few negative (padding) runs and an occasional non-monotonic jump
        let mut v = Vec::with_capacity(o.b * o.l);
        for _ in 0..o.b {
            let mut id: i32 = if rng.coin() { -1 } else { 0 };
            for _ in 0..o.l {
                if rng.below(9) == 0 {
                    id = if rng.below(6) == 0 { id - 2 } else { id + 1 };
                }
                v.push(id);
            }
        }
        Some(I32::new(cu, v))
    } else {
        None
    };
    let nseq = o.packed.as_ref().map(|p| p.len()).unwrap_or(o.b);
    let (cuv, seqs_bounds): (Option<I32>, Vec<(usize, usize, usize)>) = match &o.packed {
        Some(lens) => {
            let mut c = vec![0i32];
            let mut bnd = Vec::new();
            for &n in lens {
                let s = *c.last().unwrap() as usize;
                c.push((s + n) as i32);
                bnd.push((0, s, s + n));
            }
            assert_eq!(*c.last().unwrap() as usize, o.l);
            (Some(I32::new(cu, c)), bnd)
        }
        None => (None, (0..o.b).map(|b| (b, 0, o.l)).collect()),
    };
    let si = o.state_idx.clone().map(|v| I32::new(cu, v));
    let hi = o.has_init.clone().map(|(v, as_bool)| {
        let i = I32::new(cu, v.clone());
        let bytes: Vec<u8> = v.iter().map(|&x| (x != 0) as u8).collect();
        let bdev = cu.alloc(bytes.len() + 16);
        cu.upload(bdev, &bytes);
        let _ = as_bool;
        (i, bdev, bytes)
    });
    let hi_bool = o.has_init.as_ref().map(|h| h.1).unwrap_or(false);
    let init = if o.init {
        let (st, off) = strides_for([o.num_slots, o.d, k], if rng.coin() { Lay::Cf } else { Lay::CfPad });
        Some(T3::new(cu, o.dt, [o.num_slots, o.d, k], st, off, || rng.unif()))
    } else {
        None
    };
    let seqs = seqs_bounds
        .iter()
        .enumerate()
        .map(|(i, &(b, s, e))| {
            let slot = si.as_ref().map(|v| v.v[i] as i64).unwrap_or(i as i64);
            let skip = slot < 0 || (o.init && slot >= o.num_slots as i64);
            let hin = o.has_init.as_ref().map(|h| h.0[i] != 0).unwrap_or(true);
            SeqR { b, s, e, slot, skip, init: !skip && o.init && hin, hin }
        })
        .collect();
    let _ = nseq;
    Conv { dt: o.dt, b: o.b, d: o.d, l: o.l, w: o.w, silu: o.silu, x, weight, bias, seq, cu: cuv, si, hi, hi_bool, init, num_slots: o.num_slots, seqs }
}

fn conv_inputs(c: &Conv) -> ConvInputs {
    ConvInputs {
        backend: Backend::Gpu,
        stream: 0,
        batch: c.b as i64,
        dim: c.d as i64,
        seqlen: c.l as i64,
        width: c.w as i64,
        act: if c.silu { Act::Silu } else { Act::None },
        x: c.x.view(),
        weight: c.weight.view(),
        bias: c.bias.as_ref().map(|b| b.view()),
        seq_idx: c.seq.as_ref().map(|s| s.view(c.l as i64, 1)),
        initial_states: c.init.as_ref().map(|t| t.view()),
        seqs: match &c.cu {
            Some(cuv) => Seqs::Packed { cu_seqlens: cuv.view(1, 0), num_seqs: c.seqs.len() as i64 },
            None => Seqs::Rows,
        },
        pool: StatePool {
            state_indices: c.si.as_ref().map(|s| s.view(1, 0)),
            has_initial_state: c.hi.as_ref().map(|(i, bdev, _)| {
                if c.hi_bool {
                    IdxView { addr: *bdev as usize, stride: [1, 0], elem_bytes: 1 }
                } else {
                    i.view(1, 0)
                }
            }),
            num_slots: c.num_slots as i64,
        },
    }
}

// ------------------------------------------------------------------ forward

fn check_fwd(cu: &Cu, o: &ConvOpts, final_states: bool, alias: bool) -> String {
    check_fwd_with(cu, o, final_states, alias, None)
}

/// check_fwd with `fwd_pe` taking problems of at most `pe_max` elements (None: the library's
/// choice).
fn check_fwd_with(cu: &Cu, o: &ConvOpts, final_states: bool, alias: bool, pe_max: Option<i64>) -> String {
    let mut c = build_conv(cu, o);
    c.set_states_any(o.init || final_states);
    let mut msg = check_fwd_on(cu, &c, o.lay, final_states, alias, None, pe_max);
    // a small problem on fwd_pe: fwd_pt or the tiled / streaming kernels too, and one on fwd_pt:
    // the tiled kernels too (their small-shape coverage), unless the first run's final states
    // overwrote the pool it reads
    if msg.contains("[ccv1d_fwd_pe_") && !alias {
        msg += &format!("; without fwd_pe: {}", check_fwd_on(cu, &c, o.lay, final_states, false, None, Some(0)));
    }
    if msg.contains("[ccv1d_fwd_pt_") && !alias {
        msg += &format!("; tiled: {}", check_fwd_on(cu, &c, o.lay, final_states, false, Some(0), Some(0)));
    }
    for t in [&c.x, &c.weight] {
        t.free(cu);
    }
    msg
}

/// `pt_max` / `pe_max` of check_fwd_on: None is the library's choice (`pt_max_vectors`,
/// `pe_max_elems` or their knobs), Some(0) never.
fn check_fwd_on(cu: &Cu, c: &Conv, lay: Lay, final_states: bool, alias: bool, pt_max: Option<i64>, pe_max: Option<i64>) -> String {
    let k = c.k();
    let (st, off) = strides_for([c.b, c.d, c.l], lay);
    let out = T3::new(cu, c.dt, [c.b, c.d, c.l], st, off, nan);
    let fin = if final_states && !alias {
        let (st, off) = strides_for([c.num_slots, c.d, k], Lay::CfPad);
        Some(T3::new(cu, c.dt, [c.num_slots, c.d, k], st, off, nan))
    } else {
        None
    };
    let mut plan = FwdPlan { inp: conv_inputs(c), out: out.view(), final_states: None };
    if final_states {
        plan.final_states = Some(if alias { c.init.as_ref().unwrap().view() } else { fin.as_ref().unwrap().view() });
    }
    let launches = fwd_launches_pt(&plan, &cu.dev_info, pt_max, pe_max).unwrap();
    cu.run(&launches);

    // reference
    let mut want = vec![f64::NAN; out.host.len()];
    for r in &c.seqs {
        for d in 0..c.d {
            for t in 0..(r.e - r.s) {
                let v = if r.skip || c.id(r, t as i64) < 0 {
                    0.0
                } else {
                    let z = c.pre(r, d, t as i64);
                    if c.silu { silu(z) } else { z }
                };
                want[out.idx(r.b, d, r.s + t)] = v;
            }
        }
    }
    let mut msg = String::new();
    let (rel, _) = compare("out", &out.read(cu), &want, c.dt, 1.0);
    msg += &format!("out {rel:.1e}");
    if final_states {
        let ft: &T3 = if alias { c.init.as_ref().unwrap() } else { fin.as_ref().unwrap() };
        let mut wantf = ft.host.clone();
        for r in &c.seqs {
            if r.skip {
                continue;
            }
            let len = (r.e - r.s) as i64;
            for d in 0..c.d {
                let vals: Vec<f64> = (0..k)
                    .map(|j| {
                        let p = len - k as i64 + j as i64;
                        if c.final_cond(r, p) { c.xe(r, d, p) } else { 0.0 }
                    })
                    .collect();
                for j in 0..k {
                    wantf[ft.idx(r.slot as usize, d, j)] = vals[j];
                }
            }
        }
        let (rel, _) = compare("final_states", &ft.read(cu), &wantf, c.dt, 1.0);
        msg += &format!(" final {rel:.1e}");
    }
    out.free(cu);
    if let Some(f) = &fin {
        f.free(cu);
    }
    // "+vec": a launch on the vector path (fwd_cl: its fast walks, the burst walk for 16-bit at W <= 4)
    let tag = |l: &Launch| if params_of(l).flags & F_VEC != 0 { format!("{}+vec", l.kernel) } else { l.kernel.clone() };
    msg + &format!(" [{}]", launches.iter().map(tag).collect::<Vec<_>>().join(","))
}

// ------------------------------------------------------------------ backward

fn check_bwd(cu: &Cu, o: &ConvOpts, dinit: bool, dfinal: bool, dbias: bool, dw_dt: DType) -> String {
    check_bwd_with(cu, o, dinit, dfinal, dbias, dw_dt, SmallBwd::ALL)
}

/// check_bwd with the small kernels of `small` allowed on the first run.
fn check_bwd_with(cu: &Cu, o: &ConvOpts, dinit: bool, dfinal: bool, dbias: bool, dw_dt: DType, small: SmallBwd) -> String {
    let mut msg = check_bwd_on(cu, o, dinit, dfinal, dbias, dw_dt, small);
    // a small problem on bwd_pe: bwd_pt or the others too, and one on bwd_pt: the others too
    // (their small-shape coverage)
    if msg.contains("[ccv1d_bwd_pe_") {
        msg += &format!("; without bwd_pe: {}", check_bwd_on(cu, o, dinit, dfinal, dbias, dw_dt, SmallBwd { pe: false, ..small }));
    }
    if msg.contains("[ccv1d_bwd_pt_") {
        msg += &format!("; tiled: {}", check_bwd_on(cu, o, dinit, dfinal, dbias, dw_dt, SmallBwd::NONE));
    }
    msg
}

fn check_bwd_on(cu: &Cu, o: &ConvOpts, dinit: bool, dfinal: bool, dbias: bool, dw_dt: DType, small: SmallBwd) -> String {
    let mut c = build_conv(cu, o);
    c.set_states_any(o.init || dfinal);
    let k = c.k();
    let mut rng = Rng(o.seed.wrapping_add(77) | 1);
    let (st, off) = strides_for([c.b, c.d, c.l], o.lay);
    let dout = T3::new(cu, c.dt, [c.b, c.d, c.l], st, off, || rng.unif());
    let dx = T3::new(cu, c.dt, [c.b, c.d, c.l], st, off, nan);
    let dw = T3::new(cu, dw_dt, [c.d, c.w, 1], [c.w as i64 + 2, 1, 0], 0, nan);
    let db = if dbias && c.bias.is_some() { Some(T3::new(cu, dw_dt, [c.d, 1, 1], [1, 0, 0], 0, nan)) } else { None };
    let dfin = if dfinal {
        let (st, off) = strides_for([c.num_slots, c.d, k], Lay::CfPad);
        Some(T3::new(cu, c.dt, [c.num_slots, c.d, k], st, off, || rng.unif()))
    } else {
        None
    };
    let dini = if dinit && c.init.is_some() { Some(T3::new(cu, c.dt, [c.num_slots, c.d, k], [(c.d * k) as i64, k as i64, 1], 0, nan)) } else { None };
    let plan = BwdPlan {
        inp: conv_inputs(&c),
        dout: dout.view(),
        dfinal_states: dfin.as_ref().map(|t| t.view()),
        dx: dx.view(),
        dweight: dw.view(),
        dbias: db.as_ref().map(|t| t.view()),
        dinitial_states: dini.as_ref().map(|t| t.view()),
        workspace: None,
        deterministic: true,
    };
    let ws_bytes = bwd_workspace_bytes_pt(&plan, &cu.dev_info, small);
    let ws = cu.alloc(ws_bytes + 256);
    cu.upload(ws, &vec![0xffu8; ws_bytes + 256]); // NaN garbage: never assume a zeroed workspace
    let launches = bwd_launches_pt(&plan, &cu.dev_info, ws as usize, small).unwrap();
    cu.run(&launches);

    // reference
    let mut want_dx = vec![f64::NAN; dx.host.len()];
    let mut want_dw = vec![f64::NAN; dw.host.len()];
    let mut want_db = db.as_ref().map(|t| vec![f64::NAN; t.host.len()]);
    let mut want_di = dini.as_ref().map(|t| t.host.clone());
    let mut acc_w = vec![vec![0.0f64; c.w + 1]; c.d];
    for r in &c.seqs {
        let len = (r.e - r.s) as i64;
        for d in 0..c.d {
            let g: Vec<f64> = (0..len)
                .map(|t| {
                    if r.skip || c.id(r, t) < 0 {
                        0.0
                    } else {
                        let dy = dout.at(r.b, d, r.s + t as usize);
                        if c.silu { dy * silu_d(c.pre(r, d, t)) } else { dy }
                    }
                })
                .collect();
            let df = |p: i64| -> f64 {
                match &dfin {
                    Some(t) if !r.skip && p >= len - k as i64 && c.final_cond(r, p) => t.at(r.slot as usize, d, (p - (len - k as i64)) as usize),
                    _ => 0.0,
                }
            };
            let dxp = |p: i64| -> f64 {
                if r.skip {
                    return 0.0;
                }
                let mut a = 0.0;
                for j in 0..c.w as i64 {
                    let q = p + k as i64 - j;
                    if q >= 0 && q < len && q >= p && c.id(r, q) == c.id(r, p) {
                        a += c.wt(d, j as usize) * g[q as usize];
                    }
                }
                a + df(p)
            };
            for p in 0..len {
                want_dx[dx.idx(r.b, d, r.s + p as usize)] = dxp(p);
            }
            if let (Some(wd), Some(t)) = (want_di.as_mut(), dini.as_ref()) {
                if !r.skip {
                    for j in 0..k {
                        wd[t.idx(r.slot as usize, d, j)] = if r.init { dxp(j as i64 - k as i64) } else { 0.0 };
                    }
                }
            }
            if !r.skip {
                for t in 0..len {
                    for j in 0..c.w as i64 {
                        let p = t - k as i64 + j;
                        if c.id(r, p) == c.id(r, t) {
                            acc_w[d][j as usize] += g[t as usize] * c.xe(r, d, p);
                        }
                    }
                    acc_w[d][c.w] += g[t as usize];
                }
            }
        }
    }
    for d in 0..c.d {
        for j in 0..c.w {
            want_dw[dw.idx(d, j, 0)] = acc_w[d][j];
        }
        if let (Some(wb), Some(t)) = (want_db.as_mut(), db.as_ref()) {
            wb[t.idx(d, 0, 0)] = acc_w[d][c.w];
        }
    }
    let mut msg = String::new();
    let (rel, _) = compare("dx", &dx.read(cu), &want_dx, c.dt, 1.0);
    msg += &format!("dx {rel:.1e}");
    // dweight sums many products rounded from 16-bit inputs: judge it at the fp32 accumulation
    // tolerance scaled by the output dtype
    let got_dw = dw.read(cu);
    let (rel, _) = compare("dweight", &got_dw, &want_dw, dw_dt, 4.0);
    msg += &format!(" dw {rel:.1e}");
    let got_db = db.as_ref().map(|t| t.read(cu));
    if let (Some(g), Some(wb)) = (&got_db, &want_db) {
        let (rel, _) = compare("dbias", g, wb, dw_dt, 4.0);
        msg += &format!(" db {rel:.1e}");
    }
    if let (Some(t), Some(wd)) = (&dini, &want_di) {
        let (rel, _) = compare("dinitial_states", &t.read(cu), wd, c.dt, 1.0);
        msg += &format!(" dinit {rel:.1e}");
    }
    // determinism: a second run gives the same bits
    cu.upload(ws, &vec![0x7fu8; ws_bytes + 256]);
    cu.run(&launches);
    assert_eq!(dw.read(cu).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), got_dw.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "dweight differs between two runs");
    if let (Some(t), Some(g)) = (&db, &got_db) {
        assert_eq!(t.read(cu).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "dbias differs between two runs");
    }
    unsafe { (cu.mem_free)(ws) };
    for t in [&c.x, &c.weight, &dout, &dx, &dw] {
        t.free(cu);
    }
    msg + &format!(" ws {ws_bytes} [{}]", launches.iter().map(|l| l.kernel.as_str()).collect::<Vec<_>>().join(","))
}

// ------------------------------------------------------------------ cases

fn random_opts(rng: &mut Rng, seed: u64) -> ConvOpts {
    let dts = [DType::F32, DType::F16, DType::BF16];
    let dt = dts[rng.below(3) as usize];
    let wdt = dts[rng.below(3) as usize];
    let bdt = if rng.below(3) > 0 { Some(dts[rng.below(3) as usize]) } else { None };
    let w = 1 + rng.below(8) as usize;
    let lays = [Lay::Cf, Lay::Cl, Lay::CfPad, Lay::ClPad, Lay::Odd, Lay::CfMis];
    let lay = lays[rng.below(6) as usize];
    let ls = [0usize, 1, 2, 3, 5, 7, 9, 64, 100, 257, 1000, 2049, 4100];
    let l = ls[rng.below(ls.len() as u64) as usize];
    let d = [1usize, 3, 8, 16, 37, 64, 70, 130][rng.below(8) as usize];
    let packed = rng.below(4) == 0 && l > 0;
    let (b, packed_lens, nseq) = if packed {
        let mut lens = Vec::new();
        let mut left = l;
        while left > 0 {
            let n = if rng.below(4) == 0 { 0 } else { (1 + rng.below(2 * (l as u64 / 3).max(2))) as usize }.min(left);
            lens.push(n);
            left -= n;
        }
        if rng.coin() {
            lens.insert(rng.below(lens.len() as u64) as usize, 0);
        }
        let n = lens.len();
        (1, Some(lens), n)
    } else {
        (1 + rng.below(3) as usize, None, 0)
    };
    let nseq = if packed { nseq } else { b };
    let init = w > 1 && rng.coin();
    let use_si = rng.below(3) == 0;
    let num_slots = nseq + rng.below(3) as usize;
    let state_idx = if use_si {
        Some(
            (0..nseq)
                .map(|i| match rng.below(6) {
                    0 => -1,
                    1 => (num_slots + 2) as i32, // out of range → skipped on the GPU
                    _ => ((i + 1) % num_slots) as i32,
                })
                .collect(),
        )
    } else {
        None
    };
    let has_init = if init && rng.coin() { Some(((0..nseq).map(|_| (rng.below(3) != 0) as i32 * 5).collect(), rng.coin())) } else { None };
    ConvOpts {
        dt,
        wdt,
        bdt,
        b,
        d,
        l,
        w,
        silu: rng.coin(),
        lay,
        seq_idx: !packed && rng.below(3) == 0,
        init,
        packed: packed_lens,
        state_idx,
        has_init,
        num_slots,
        seed,
        w_rows: seed % 2 == 0,
        saturate: false,
    }
}

fn describe(o: &ConvOpts) -> String {
    format!(
        "{:?} w{:?} b{:?} B{} D{} L{} W{} silu{} {:?} seq{} init{} packed{:?} si{:?} hi{:?} slots{} wrows{}",
        o.dt, o.wdt, o.bdt, o.b, o.d, o.l, o.w, o.silu as u8, o.lay, o.seq_idx as u8, o.init as u8, o.packed, o.state_idx, o.has_init, o.num_slots, o.w_rows as u8
    )
}

fn run_case<F: FnOnce() -> String>(name: &str, f: F) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    match r {
        Ok(m) => {
            if verbose() {
                println!("ok   {name}: {m}");
            }
        }
        Err(e) => {
            let m = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            panic!("FAILED {name}: {m}");
        }
    }
}

#[test]
#[ignore]
fn gpu_fwd_random() {
    with_gpu(|cu| {
        let mut rng = Rng(0xC0FFEE);
        let n: usize = std::env::var("CCV1D_GPUTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
        for i in 0..n {
            let o = random_opts(&mut rng, i as u64 + 1);
            let fin = o.w > 1 && rng.coin();
            let alias = fin && o.init && rng.coin();
            let name = format!("fwd#{i} {} final{} alias{}", describe(&o), fin as u8, alias as u8);
            run_case(&name, || check_fwd(cu, &o, fin, alias));
        }
    });
}

#[test]
#[ignore]
fn gpu_bwd_random() {
    with_gpu(|cu| {
        let mut rng = Rng(0xBADC0DE);
        let n: usize = std::env::var("CCV1D_GPUTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
        for i in 0..n {
            let o = random_opts(&mut rng, i as u64 + 1000);
            let dinit = o.init && rng.coin();
            let dfinal = o.w > 1 && rng.coin();
            let dw_dt = if rng.coin() { DType::F32 } else { o.wdt };
            let name = format!("bwd#{i} {} dinit{} dfinal{} dw{:?}", describe(&o), dinit as u8, dfinal as u8, dw_dt);
            run_case(&name, || check_bwd(cu, &o, dinit, dfinal, true, dw_dt));
        }
    });
}

fn big(dt: DType, lay: Lay, b: usize, d: usize, l: usize, w: usize) -> ConvOpts {
    ConvOpts { dt, wdt: DType::F32, bdt: Some(DType::F32), b, d, l, w, silu: true, lay, seq_idx: false, init: false, packed: None, state_idx: None, has_init: None, num_slots: b, seed: 5, w_rows: false, saturate: false }
}

/// Rows-mode states through a pool of b + 1 slots: row i takes slot i + 1 (wrapping), -1
/// (skipped) or one past the pool (skipped), in turn; has_initial_state is set on the even rows
/// (as int32, or as bool when `hi_bool`); `init`: initial states given at all.
fn pool_states(o: &mut ConvOpts, init: bool, hi_bool: bool) {
    let b = o.b;
    o.init = init;
    o.num_slots = b + 1;
    o.state_idx = Some((0..b).map(|i| [((i + 1) % (b + 1)) as i32, -1, (b + 3) as i32][i % 3]).collect());
    o.has_init = Some(((0..b).map(|i| (i % 2 == 0) as i32 * 3).collect(), hi_bool));
}

/// Shapes big enough for several tiles per block and several chunks per row.
#[test]
#[ignore]
fn gpu_large_shapes() {
    with_gpu(|cu| {
        for (dt, lay, b, d, l, w) in [
            (DType::F32, Lay::Cf, 2, 1100, 4096, 4),
            (DType::BF16, Lay::Cf, 1, 3000, 8200, 4),
            (DType::BF16, Lay::Cl, 2, 512, 3000, 4),
            (DType::F16, Lay::Cl, 1, 1000, 9000, 3),
            (DType::BF16, Lay::Cf, 1, 3, 70000, 8),
        ] {
            let o = big(dt, lay, b, d, l, w);
            let name = describe(&o);
            run_case(&format!("large fwd {name}"), || check_fwd(cu, &o, false, false));
            run_case(&format!("large bwd {name}"), || check_bwd(cu, &o, false, false, true, DType::F32));
        }
    });
}

/// The channel-last forward on grids of many short blocks (`fwd_cl_geometry`): 16-bit at W <= 4
/// in chunks of 88 tokens on `fwd_cl11` (11 a lane) up to 2 waves, else on `fwd_cl`'s burst walk
/// in chunks of 64 up to 4 waves of them, else of 128, or under a tile; each case must run on the
/// kernel's vector path. A partial last channel tile and chunk, padded rows, initial and final
/// states, SiLU on and off; f32 in 32-token chunks (64 at W = 6). The last chunks leave lanes
/// fewer tokens than a step (in chunks of 88: 6508 7 of 11 from the lane's start, 512 6, 6460 3,
/// 2000 9; of 128: 6500 4 of 8 and 7000 8, 1004 8 + 4; of 64: 4401 1 of 8; 2000 in 24-token
/// chunks: 3 a lane; f32 3002: 2 of 4; 3003: 3 of 4), which the 16-bit walks take in one
/// predicated step and the f32 walk one token at a time.
#[test]
#[ignore]
fn gpu_fwd_cl_short_chunks() {
    with_gpu(|cu| {
        // (.., on fwd_cl11)
        for (dt, lay, b, d, l, w, states, long) in [
            (DType::BF16, Lay::Cl, 2, 1000, 6500, 4, false, false),
            (DType::F16, Lay::Cl, 1, 2048, 6400, 2, false, false),
            (DType::BF16, Lay::Cl, 2, 1000, 6500, 1, false, false),
            (DType::F16, Lay::ClPad, 4, 576, 7000, 3, true, false),
            (DType::F32, Lay::ClPad, 2, 700, 3002, 4, true, false),
            (DType::F32, Lay::Cl, 2, 700, 3003, 6, false, false),
            (DType::BF16, Lay::ClPad, 1, 512, 6508, 4, true, true),
            (DType::F16, Lay::Cl, 2, 256, 2000, 3, false, false),
            (DType::BF16, Lay::Cl, 4, 4096, 512, 4, false, true),
            (DType::BF16, Lay::Cl, 16, 2048, 1004, 4, false, false),
            (DType::BF16, Lay::Cl, 1, 2048, 4401, 4, false, false),
            (DType::F16, Lay::Cl, 1, 1000, 6460, 2, false, true),
            (DType::BF16, Lay::ClPad, 4, 576, 2000, 1, true, true),
        ] {
            let mut o = big(dt, lay, b, d, l, w);
            o.silu = w != 2;
            o.init = states;
            o.seed = (d * 10 + w) as u64;
            let name = format!("short chunks {}", describe(&o));
            run_case(&name, || {
                let m = check_fwd(cu, &o, states, false);
                let kernel = format!("[ccv1d_fwd_{}_{}_w{w}", if long { "cl11" } else { "cl" }, dt_name(dt));
                assert!(m.contains(&format!("{kernel}+vec")), "not on {kernel}'s vector path: {m}");
                m
            });
        }
    });
}

/// A case of the `fwd_pt` / `bwd_pt` self-tests: shape `si` of the list at width w, with states at
/// odd si + w (bf16 weights, a slot pool: initial states from W = 2 on, has_initial_state bool at
/// W = 4 and 8, else int32), otherwise f32 weights. Bias absent, x's dtype or f32 in turn; SiLU at
/// even widths.
fn pt_case(dt: DType, lay: Lay, (b, d, l): (usize, usize, usize), si: usize, w: usize, seed: u64) -> ConvOpts {
    let states = (si + w) % 2 == 1;
    let mut o = big(dt, lay, b, d, l, w);
    o.wdt = if states { DType::BF16 } else { DType::F32 };
    o.bdt = [None, Some(dt), Some(DType::F32)][(si + w) % 3];
    o.silu = w % 2 == 0;
    o.seed = (si * 1000 + w * 10 + states as usize) as u64 + seed;
    if states {
        pool_states(&mut o, w > 1, w % 4 == 0);
    }
    o
}

/// The loop of the small-kernel self-tests (`fwd_pt`, `fwd_pe`, `bwd_pt`, `bwd_pe`): every
/// dtype, layout of `lays`, shape of `shapes(v)` (v: elements of a 16-byte vector) and width 1-8,
/// each case from `pt_case` (with the weight as whole rows or padded in turn when `vary_w_rows`),
/// run by `check(case, states, si)`, whose message must name `ccv1d_{family}_{dtype}_w{W}`.
fn small_kernel_sweep(
    family: &str,
    lays: &[Lay],
    shapes: impl Fn(usize) -> Vec<(usize, usize, usize)>,
    seed: u64,
    vary_w_rows: bool,
    check: impl Fn(&ConvOpts, bool, usize) -> String,
) {
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for &lay in lays {
            for (si, &shape) in shapes(16 / dt.size()).iter().enumerate() {
                for w in 1..=8 {
                    let states = (si + w) % 2 == 1;
                    let mut o = pt_case(dt, lay, shape, si, w, seed);
                    if vary_w_rows {
                        o.w_rows = (si + w) % 3 != 0;
                    }
                    run_case(&format!("{family} {}", describe(&o)), || {
                        let m = check(&o, states, si);
                        assert!(m.contains(&format!("[ccv1d_{family}_{}_w{w}", dt_name(dt))), "not on {family}: {m}");
                        m
                    });
                }
            }
        }
    }
}

/// Small channel-first forwards on `fwd_pt` (a vector per thread), each case also on the tiled
/// kernels (check_fwd): every dtype and width, contiguous and padded rows, rows of one vector to
/// past 128 vectors (several grid segments), bias absent, 16-bit or f32, and with states:
/// initial states through state indices with skipped rows (slot -1 and past the pool),
/// has_initial_state as int32 and bool, final states. Each case must run on it.
#[test]
#[ignore]
fn gpu_fwd_pt() {
    // seeds' Tiny and Small; one vector a row; 130 vectors a row (two segments); 3 channels of a
    // block; W - 1 past a vector (f32, W = 6-8)
    let shapes = |v| vec![(1, 32, 64), (2, 64, 256), (3, 5, v), (2, 3, 130 * v), (1, 3, 3 * v)];
    with_gpu(|cu| {
        small_kernel_sweep("fwd_pt", &[Lay::Cf, Lay::CfPad], shapes, 0, false, |o, states, _| check_fwd(cu, o, states && o.w > 1, false));
    });
}

/// The smallest forwards on `fwd_pe` (an element per thread; up to 2^17 elements here, past the
/// library's channel-first limits), each case also without it (check_fwd): every dtype and
/// width; channel-last contiguous, padded and misaligned rows and channel-first contiguous,
/// padded and misaligned ones; 5 to 1040 channels and 3 to 1040
/// tokens (several blocks either way), rows shorter than the window; weights as whole rows or
/// padded, bias absent, 16-bit or f32, and the states of `pt_case`. Each case must run on it.
#[test]
#[ignore]
fn gpu_fwd_pe() {
    let shapes = |v| vec![(1, 32, 64), (2, 64, 256), (3, 5, 5), (2, 130 * v, 3), (1, v, 130), (2, 3, 1040)];
    let lays = [Lay::Cl, Lay::ClPad, Lay::ClOdd, Lay::Cf, Lay::CfPad, Lay::CfMis];
    with_gpu(|cu| {
        small_kernel_sweep("fwd_pe", &lays, shapes, 0, true, |o, states, _| check_fwd_with(cu, o, states && o.w > 1, false, Some(1 << 17)));
    });
}

/// Small channel-first backwards on `bwd_pt` (a vector per thread), each case also on the other
/// kernels (check_bwd): every dtype and width, contiguous and padded rows, channels of 7 to 64
/// vectors (groups within a warp, partly filled, and across warps), rows of one vector, a partial
/// last block, and with states:
/// initial states through state indices with skipped rows (slot -1 and past the pool),
/// has_initial_state as int32 and bool, dfinal, dinitial_states; bias absent, 16-bit or f32;
/// dweight/dbias in f32 or x's dtype. Each case must run on it.
#[test]
#[ignore]
fn gpu_bwd_pt() {
    // seeds' Tiny, 003's Small (f32: 64 vectors, 2 warps a channel); one vector a row; 15
    // vectors; 256 tokens in 4 rows; W - 1 past a vector (f32, W = 6-8)
    let shapes = |v| vec![(1, 32, 64), (2, 64, 128), (7, 5, v), (5, 3, 3 * v), (4, 6, 64)];
    with_gpu(|cu| {
        small_kernel_sweep("bwd_pt", &[Lay::Cf, Lay::CfPad], shapes, 7, false, |o, states, si| {
            check_bwd(cu, o, states, states && o.w > 1, true, if si % 2 == 0 { DType::F32 } else { o.dt })
        });
    });
}

/// Channel-first backwards on `bwd_pt` with a channel's 128 to 512 vectors (up to 4096 tokens,
/// past the library's default limit), each case also on the other kernels (check_bwd): every
/// dtype and width, contiguous and padded rows; one vector a thread in blocks of 128 (130
/// channels, 130 blocks) and of 256 threads (a channel's 129 to 256 vectors on a narrow grid:
/// rows ending inside a warp, a partly live block); 2 vectors a thread in blocks of 256 (257 to
/// 512 vectors) and of 128 threads (600 channels: a wide grid); the states, bias and dweight
/// dtypes of `gpu_bwd_pt` (with state tensors and without: the kernel's two paths). Each case
/// must run on it.
#[test]
#[ignore]
fn gpu_bwd_pt_vectors() {
    // 256 vectors in 2 rows; 512 of one row; 210 in 3 rows of 70; 200 in 5 rows of 40; 128
    // vectors over 130 channels; 384 in 4 rows of 96; 210 in 3 rows of 70 over 600 channels
    let shapes = |v| vec![(2, 5, 128 * v), (1, 3, 512 * v), (3, 4, 70 * v), (5, 6, 40 * v), (2, 130, 64 * v), (4, 2, 96 * v), (3, 600, 70 * v)];
    let small = SmallBwd { pt_tokens: Some(4096), ..SmallBwd::ALL };
    with_gpu(|cu| {
        small_kernel_sweep("bwd_pt", &[Lay::Cf, Lay::CfPad], shapes, 13, false, |o, states, si| {
            check_bwd_with(cu, o, states, states && o.w > 1, true, if si % 2 == 0 { DType::F32 } else { o.dt }, small)
        });
    });
}

/// Channel-first backwards on `bwd_cfw7` (`bwd_cfw` at 7 resident blocks) where the default
/// takes it: 1100 channels of 8192 tokens, 2200 blocks (2.08 waves at 8 blocks a multiprocessor
/// on the H100, 2.38 at 7); every dtype, W = 1-4, SiLU at W >= 2 (16-bit W = 4: silu_grad_fma), states
/// (initial states through a slot pool, dfinal, dinitial_states) at odd widths; and bf16 W = 4
/// with pre-activations past the fp32 range (`ConvOpts::saturate`: silu_grad_fma's second
/// pass). Each case must run on it (H100-sized devices; elsewhere the case reports the kernel it
/// ran on).
#[test]
#[ignore]
fn gpu_bwd_cfw7() {
    let widths = [DType::F32, DType::F16, DType::BF16].into_iter().flat_map(|dt| (1..=4).map(move |w| (dt, w, false)));
    with_gpu(|cu| {
        for (dt, w, saturate) in widths.chain([(DType::BF16, 4, true)]) {
            let mut o = pt_case(dt, Lay::Cf, (1, 1100, 8192), 0, w, 3);
            o.silu = w >= 2;
            o.saturate = saturate;
            let states = w % 2 == 1;
            run_case(&format!("bwd_cfw7 {}{}", describe(&o), if saturate { " saturated" } else { "" }), || {
                let m = check_bwd(cu, &o, states, states && o.w > 1, true, DType::F32);
                let sms = cu.dev_info.multiprocessors;
                let fam = if states { "cfw7x" } else { "cfw7" };  // rows with states: the x instances
                assert!(sms != 132 || m.contains(&format!("[ccv1d_bwd_{fam}_{}_w{w}", dt_name(dt))), "not on bwd_{fam}: {m}");
                m
            });
        }
    });
}

/// Channel-first backwards on `bwd_cfw2` (`bwd_cfw` in 256-thread blocks) where the default
/// takes it: 8 batch rows a block of 4 warp spans each (f32, 1024 tokens; 16-bit, 2048), so 4
/// spans for each of its 8 warps; every dtype, W = 1-4, SiLU at even widths, no states (rows with
/// them keep bwd_cfwx / bwd_cfw7x). Each case must run on it on H100-sized devices without
/// `fast_memory` (an H200 keeps bwd_cfw: validate.sh's cfw2-everywhere step runs it there);
/// elsewhere the case reports the kernel it ran on.
#[test]
#[ignore]
fn gpu_bwd_cfw2() {
    with_gpu(|cu| {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let shape = if dt == DType::F32 { (8, 2048, 1024) } else { (8, 1024, 2048) };
            for w in 1..=4 {
                let o = pt_case(dt, Lay::Cf, shape, w % 2, w, 5);  // (si + w even: no states)
                run_case(&format!("bwd_cfw2 {}", describe(&o)), || {
                    let m = check_bwd(cu, &o, false, false, true, DType::F32);
                    let rule = cu.dev_info.multiprocessors == 132 && !fast_memory(&cu.dev_info);
                    assert!(!rule || m.contains(&format!("[ccv1d_bwd_cfw2_{}_w{w}", dt_name(dt))), "not on bwd_cfw2: {m}");
                    m
                });
            }
        }
    });
}

/// Channel-first backwards on `bwd_cfwl` (`bwd_cfw` in spans of 4 vectors a lane) where the
/// default takes it on fast-memory devices: f32 1x4096x4096 (2^24 elements) at W = 3, 6 and 8,
/// SiLU at even widths; 16-bit 2x8192x4096 (2^26) with SiLU, bf16 at W = 2, 4 (silu_grad_fma)
/// and 5, f16 at W = 4; bias absent, in x's dtype or f32; and bf16 W = 4 with pre-activations
/// past the fp32 range (its second pass). Each case must run on it on an H200-sized device
/// (`fast_memory`, 132 multiprocessors); elsewhere the case reports the kernel it ran on
/// (validate.sh's cfwl-everywhere step runs the kernel on any device).
#[test]
#[ignore]
fn gpu_bwd_cfwl() {
    let f32s = [3, 6, 8].map(|w| (DType::F32, w, false));
    let h16 = [(DType::BF16, 2, false), (DType::BF16, 4, false), (DType::BF16, 5, false), (DType::F16, 4, false)];
    with_gpu(|cu| {
        for (dt, w, saturate) in f32s.into_iter().chain(h16).chain([(DType::BF16, 4, true)]) {
            let shape = if dt == DType::F32 { (1, 4096, 4096) } else { (2, 8192, 4096) };
            let mut o = pt_case(dt, Lay::Cf, shape, w % 2, w, 7);  // (si + w even: no states)
            o.silu = dt != DType::F32 || w % 2 == 0;
            o.saturate = saturate;
            run_case(&format!("bwd_cfwl {}{}", describe(&o), if saturate { " saturated" } else { "" }), || {
                let m = check_bwd(cu, &o, false, false, true, DType::F32);
                let rule = cu.dev_info.multiprocessors == 132 && fast_memory(&cu.dev_info);
                assert!(!rule || m.contains(&format!("[ccv1d_bwd_cfwl_{}_w{w}", dt_name(dt))), "not on bwd_cfwl: {m}");
                m
            });
        }
    });
}

/// The SiLU backward where the pre-activation overflows fp32 to ±inf (`ConvOpts::saturate`):
/// silu' takes its limits, 1 and 0, as in the f64 reference (finite there). `bwd_pt` and
/// `bwd_cfw` (16-bit, W = 5-8) run a block with silu_grad_fast / silu_grad_fma first, which give
/// NaN at z = ±inf, and then again with act_grad: both passes run here. Channel-first on `bwd_pt`
/// (2 vectors a thread, and one) and, 1024 tokens a row, `bwd_cfw` (check_bwd's other-kernel run),
/// and channel-last; bf16 and f32, W = 4-8.
#[test]
#[ignore]
fn gpu_bwd_silu_saturated() {
    with_gpu(|cu| {
        for dt in [DType::BF16, DType::F32] {
            for lay in [Lay::Cf, Lay::Cl] {
                for (b, d, l) in [(2, 8, 1024), (1, 6, 256)] {
                    for w in 4..=8 {
                        let mut o = big(dt, lay, b, d, l, w);
                        o.saturate = true;
                        o.seed = (w * 10 + b) as u64;
                        run_case(&format!("saturated {}", describe(&o)), || {
                            let m = check_bwd(cu, &o, false, false, true, DType::F32);
                            let on = |fam: &str| m.contains(&format!("ccv1d_{fam}_{}_w{w}", dt_name(dt)));
                            assert!(lay != Lay::Cf || on("bwd_pt"), "not on bwd_pt: {m}");
                            assert!(lay != Lay::Cf || l < 1024 || on("bwd_cfw"), "not on bwd_cfw: {m}");
                            m
                        });
                    }
                }
            }
        }
    });
}

/// `bwd_cfw`'s walk that carries the right halo from span to span (16-bit W = 8 with SiLU,
/// hip/bwd_cf.hip CARRY), on grids where a warp walks runs of spans (H100 geometry): 4x150x4096
/// (whole rows, 8 spans a block: runs of 2), 8x150x2048 (2 batch rows of 4 spans: runs of 2),
/// 8x200x2056 (2 rows of 5 spans, the last ragged and moved back: runs of 3 that cross rows), and
/// bf16 3x300x4096 (whole rows: runs of 2) with pre-activations past the fp32 range (the carrying
/// pass meets NaN and the block runs again without it; `saturate` takes bf16 or f32 x and B <= 3).
/// Each case must run on `bwd_cfw`.
#[test]
#[ignore]
fn gpu_bwd_cfw_carry() {
    with_gpu(|cu| {
        for dt in [DType::BF16, DType::F16] {
            for (b, d, l, saturate) in [(4, 150, 4096, false), (8, 150, 2048, false), (8, 200, 2056, false), (3, 300, 4096, true)] {
                if saturate && dt == DType::F16 {
                    continue;
                }
                let mut o = big(dt, Lay::Cf, b, d, l, 8);
                o.saturate = saturate;
                o.seed = (b * 100 + d) as u64;
                run_case(&format!("cfw carry {}{}", describe(&o), if saturate { " saturated" } else { "" }), || {
                    let m = check_bwd(cu, &o, false, false, true, DType::F32);
                    assert!(m.contains(&format!("[ccv1d_bwd_cfw_{}_w8", dt_name(dt))), "not on bwd_cfw: {m}");
                    m
                });
            }
        }
    });
}

/// The smallest backwards on `bwd_pe` (an element per thread, a channel's tokens in one block),
/// each case also on the other kernels (check_bwd): every dtype and width; channel-last
/// contiguous, padded and misaligned rows and channel-first contiguous, padded and misaligned
/// ones; the seeds' Tiny and Small (512 tokens a block), rows shorter than the window (8 channels
/// a block), ragged B and L (padded to powers of two), a partial last block; and with states:
/// initial states through state indices with skipped rows (slot -1 and past the pool),
/// has_initial_state as int32 and bool, dfinal, dinitial_states; bias absent, 16-bit or f32;
/// dweight/dbias in f32 or x's dtype; SiLU at even widths. Each case must run on it.
#[test]
#[ignore]
fn gpu_bwd_pe() {
    let shapes = |_| vec![(1, 32, 64), (2, 64, 256), (2, 12, 3), (3, 5, 7), (5, 9, 50)];
    let lays = [Lay::Cl, Lay::ClPad, Lay::ClOdd, Lay::Cf, Lay::CfPad, Lay::CfMis];
    with_gpu(|cu| {
        small_kernel_sweep("bwd_pe", &lays, shapes, 11, false, |o, states, si| {
            check_bwd(cu, o, states, states && o.w > 1, true, if si % 2 == 0 { DType::F32 } else { o.dt })
        });
    });
}

/// Tiny channel-last problems on `bwd_slab` (one launch): every dtype and width, contiguous and
/// padded rows, partial last slabs, and with states: skipped rows (slot -1 and past the pool),
/// bool has_initial_state, dfinal, dinitial_states, SiLU. Each case must run on it.
#[test]
#[ignore]
fn gpu_bwd_slab() {
    with_gpu(|cu| {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let v = 16 / dt.size();
            for lay in [Lay::Cl, Lay::ClPad] {
                // seeds' Tiny; 003's Small (a vector per thread: 4 / 8 elements); 68 slabs of 16
                // channels, the last one partial; a vector's channels
                for (b, d, l) in [(1, 32, 64), (2, 64, 128), (2, 1080, 8), (4, v, 8), (3, 2 * v, 5)] {
                    for w in 1..=8 {
                        for states in [false, true] {
                            let mut o = big(dt, lay, b, d, l, w);
                            o.wdt = if states { DType::BF16 } else { DType::F32 };
                            o.bdt = if states { None } else { Some(dt) };
                            o.silu = states;
                            o.seed = (b * 1000 + w * 10 + states as usize) as u64;
                            let dfinal = states && w > 1;
                            if states {
                                pool_states(&mut o, w > 1, true);
                            }
                            let name = format!("slab {} dfinal{}", describe(&o), dfinal as u8);
                            run_case(&name, || {
                                let m = check_bwd(cu, &o, states, dfinal, true, if states { DType::F32 } else { dt });
                                assert!(m.contains("[ccv1d_bwd_slab_"), "not on bwd_slab: {m}");
                                m
                            });
                        }
                    }
                }
            }
        }
    });
}

/// A case of the `bwd_clw` / `fwd_clw` self-tests: shape `si` of the list at width w. Without
/// states: f32 weights and a 16-bit bias; with them: bf16 weights, no bias, a slot pool with
/// has_initial_state (int32 at odd widths, bool at even). SiLU and whole weight rows alternate.
fn clw_case(dt: DType, lay: Lay, (b, d, l): (usize, usize, usize), si: usize, w: usize, states: bool, seed: u64) -> ConvOpts {
    let mut o = big(dt, lay, b, d, l, w);
    o.wdt = if states { DType::BF16 } else { DType::F32 };
    o.bdt = if states { None } else { Some(dt) };
    o.silu = (si + w) % 2 == 0;
    o.w_rows = si % 2 == 1;
    o.seed = (si * 1000 + w * 10 + states as usize) as u64 + seed;
    if states {
        pool_states(&mut o, true, w % 2 == 0);
    }
    o
}

/// The channel-last backward on `bwd_clw` (16-bit x at W = 2-8, f32 at W <= 5 and 8 on grids of
/// two waves or more; whole 16-byte vectors along D):
/// contiguous and padded rows, a partial channel tile, segments shorter than the window and not a
/// multiple of a copy step, one chunk and many, grids of two waves (rings of 3 and 4 slots), and
/// with states: skipped rows (slot -1 and past the pool), has_initial_state, dfinal,
/// dinitial_states; SiLU on and off, bias absent or 16-bit. Each case must run on it.
#[test]
#[ignore]
fn gpu_bwd_clw() {
    with_gpu(|cu| {
        for dt in [DType::F16, DType::BF16] {
            for lay in [Lay::Cl, Lay::ClPad] {
                // (past the slab kernel: more than 256 tokens of all rows, or 65 rows) a partial
                // 64-channel tile, 1-2 tokens a group, ragged L, several chunks per row, W = 2-8
                // (5 and 4 blocks a SM); grids of two waves (H100) with SiLU: 8x5376x128 on a ring
                // of 3 slots at W = 4 (and W = 7), 5x3072x2048 in 192-token chunks on 3 at W = 4,
                // in 256 on 4 at W = 5 and in 512 at W = 8 (bf16 contiguous without states only:
                // 31M elements)
                let shapes = [(2, 72, 137), (65, 8, 5), (1, 136, 300), (2, 200, 1003), (5, 64, 700), (8, 5376, 128), (5, 3072, 2048)];
                for (si, &(b, d, l)) in shapes.iter().enumerate() {
                    for w in 2..=8 {
                        let big_w: &[_] = if si == 5 { &[4, 7] } else { &[4, 5, 8] };
                        if (si >= 5 && !big_w.contains(&w)) || (si == 6 && (dt != DType::BF16 || lay != Lay::Cl)) {
                            continue;
                        }
                        for states in [false, true] {
                            if si == 6 && states {
                                continue;
                            }
                            let mut o = clw_case(dt, lay, (b, d, l), si, w, states, 0);
                            o.silu |= si >= 5;
                            let name = format!("clw {} dfinal{}", describe(&o), states as u8);
                            run_case(&name, || {
                                let m = check_bwd(cu, &o, states, states, true, if states { DType::F32 } else { dt });
                                assert!(m.contains(&format!("[ccv1d_bwd_clw_{}_w{w}", dt_name(dt))), "not on bwd_clw: {m}");
                                m
                            });
                        }
                    }
                }
            }
        }
        // f32 takes it by default at W <= 5 and W = 8 on grids of two waves or more: 16x5376x128
        // at W = 5 and 8 (4 waves on an H100), 8x5376x128 at W = 1 and 3 (in 64-token chunks, 2
        // waves of them; below the 2^23 elements from which fast-memory devices such as the H200
        // take bwd_cls at W <= 4), SiLU on and off, with and without states; 2x4096x1000 at W = 2
        // / 4: 64-token chunks (3.1 waves) on a ragged row, its last chunk 40 tokens (a group with
        // none); at W = 1-4 on every grid, with the halo: 2x200x1003 (one wave, a partial channel
        // tile, ragged rows)
        let f32_cases = [(8, 5376, 128, 1), (8, 5376, 128, 3), (16, 5376, 128, 5), (16, 5376, 128, 8), (2, 4096, 1000, 2), (2, 4096, 1000, 4), (2, 200, 1003, 1), (2, 200, 1003, 2), (2, 200, 1003, 4)];
        for lay in [Lay::Cl, Lay::ClPad] {
            for (b, d, l, w) in f32_cases {
                let shape = (b, d, l);
                for states in [false, true] {
                    let mut o = clw_case(DType::F32, lay, shape, 5, w, states, 3);
                    o.silu = !states;
                    let name = format!("clw {} dfinal{}", describe(&o), states as u8);
                    run_case(&name, || {
                        let m = check_bwd(cu, &o, states, states, true, DType::F32);
                        assert!(m.contains(&format!("[ccv1d_bwd_clw_f32_w{w}")), "not on bwd_clw: {m}");
                        m
                    });
                }
            }
        }
    });
}

/// The channel-last forward on `fwd_clw` (16-bit x, W >= 5, whole 16-byte vectors along D):
/// contiguous and padded rows, a partial channel tile, groups with 0-2 tokens, ragged L, several
/// chunks a row and a grid of 256-token chunks with an empty last group; with states: skipped rows
/// (slot -1 and past the pool), has_initial_state int32 and bool, final states; SiLU on and off,
/// bias absent or 16-bit, weights as whole rows or padded. Each case must run on it.
#[test]
#[ignore]
fn gpu_fwd_clw() {
    with_gpu(|cu| {
        for dt in [DType::F16, DType::BF16] {
            for lay in [Lay::Cl, Lay::ClPad] {
                let shapes = [(2, 72, 137), (65, 8, 5), (1, 136, 300), (2, 200, 1003), (5, 64, 700), (4, 1024, 8500)];
                for (si, &(b, d, l)) in shapes.iter().enumerate() {
                    for w in 5..=8 {
                        if si == 5 && w != 7 {
                            continue;  // the big grid once per dtype and layout
                        }
                        for states in [false, true] {
                            let o = clw_case(dt, lay, (b, d, l), si, w, states, 7);
                            let name = format!("fwd clw {} final{}", describe(&o), states as u8);
                            run_case(&name, || {
                                let m = check_fwd(cu, &o, states, false);
                                assert!(m.contains(&format!("[ccv1d_fwd_clw_{}_w{w}", dt_name(dt))), "not on fwd_clw: {m}");
                                m
                            });
                        }
                    }
                }
            }
        }
    });
}

/// Sequence starts, short sequences, aliasing pools, zero lengths.
#[test]
#[ignore]
fn gpu_edge_cases() {
    with_gpu(|cu| {
        for dt in [DType::F32, DType::BF16] {
            for w in [1, 2, 4, 8] {
                for l in [0usize, 1, 2, 6, 7, 8] {
                    for lay in [Lay::Cf, Lay::Cl] {
                        let mut o = big(dt, lay, 2, 9, l, w);
                        o.init = w > 1;
                        o.num_slots = 2;
                        for seq in [false, true] {
                            o.seq_idx = seq && l > 0;
                            let name = format!("edge {}", describe(&o));
                            if w > 1 {
                                run_case(&format!("{name} fwd alias"), || check_fwd(cu, &o, true, true));
                                run_case(&format!("{name} fwd"), || check_fwd(cu, &o, true, false));
                            }
                            run_case(&format!("{name} bwd"), || check_bwd(cu, &o, true, w > 1, true, DType::BF16));
                        }
                    }
                }
            }
        }
        // varlen: zero-length sequences, skips, out-of-range slots, bool has_initial_state, aliasing pool
        for (lens, si, hi) in [
            (vec![5usize, 0, 3, 1, 0, 40], vec![2i32, 0, -1, 1, 3, 9], vec![1i32, 0, 1, 1, 0, 1]),
            (vec![0, 0, 100], vec![0, 1, 2], vec![0, 1, 1]),
            (vec![2, 2, 2, 2], vec![3, 2, 1, 0], vec![1, 1, 0, 1]),
        ] {
            for lay in [Lay::Cf, Lay::Cl, Lay::Odd] {
                for as_bool in [false, true] {
                    let l = lens.iter().sum();
                    let mut o = big(DType::BF16, lay, 1, 20, l, 4);
                    o.init = true;
                    o.num_slots = 4;
                    o.packed = Some(lens.clone());
                    o.state_idx = Some(si.clone());
                    o.has_init = Some((hi.clone(), as_bool));
                    let name = format!("varlen {}", describe(&o));
                    run_case(&format!("{name} fwd alias"), || check_fwd(cu, &o, true, true));
                    run_case(&format!("{name} bwd"), || check_bwd(cu, &o, true, true, true, DType::F32));
                }
            }
        }
    });
}

// ------------------------------------------------------------------ update

/// One decode-update case of `check_update`: shapes, features and every tensor's layout.
struct UpdCase {
    dt: DType,
    b: usize,
    d: usize,
    s: usize,
    w: usize,
    sl: usize,
    cache: bool,
    csi: bool,
    inplace: bool,
    silu: bool,
    seed: u64,
    x_s: [i64; 3],
    out_s: [i64; 3],
    cs_s: [i64; 3],
    w_dt: DType,
    w_s: [i64; 2],
    /// dtype and stride of the bias, if any
    bias: Option<(DType, i64)>,
    /// the kernel family the call must run on (prefix of the launch's name), if it matters
    kernel: Option<&'static str>,
}

impl UpdCase {
    /// x with a padded row stride, out channel-minor, slots padded by one position, bf16 weights, f32 bias.
    #[allow(clippy::too_many_arguments)]
    fn basic(dt: DType, b: usize, d: usize, s: usize, w: usize, sl: usize, cache: bool, csi: bool, inplace: bool, silu: bool, seed: u64) -> UpdCase {
        UpdCase {
            dt,
            b,
            d,
            s,
            w,
            sl,
            cache,
            csi,
            inplace,
            silu,
            seed,
            x_s: [(d * s + 3) as i64, s as i64, 1],
            out_s: [(d * s) as i64, 1, d as i64],
            cs_s: [(d * (sl + 1)) as i64, (sl + 1) as i64, 1],
            w_dt: DType::BF16,
            w_s: [w as i64, 1],
            bias: Some((DType::F32, 1)),
            kernel: None,
        }
    }
}

fn check_update(cu: &Cu, c: &UpdCase) -> String {
    let UpdCase { dt, b, d, s, w, sl, cache, csi, inplace, silu, seed, .. } = *c;
    let mut rng = Rng(seed | 1);
    let k = w - 1;
    let nslots = b + 2;
    let x = T3::new(cu, dt, [b, d, s], c.x_s, 0, || rng.unif());
    let out = if inplace { None } else { Some(T3::new(cu, dt, [b, d, s], c.out_s, 0, nan)) };
    let cs = T3::new(cu, dt, [nslots, d, sl], c.cs_s, 0, || rng.unif());
    let weight = T3::new(cu, c.w_dt, [d, w, 1], [c.w_s[0], c.w_s[1], 0], 0, || rng.unif());
    let (b_dt, b_s) = c.bias.unwrap_or((DType::F32, 1));
    let bias = T3::new(cu, b_dt, [d, 1, 1], [b_s, 0, 0], 0, || rng.unif());
    let csl: Vec<i32> = (0..b).map(|_| rng.below(3 * sl as u64 + 5) as i32 - 2).collect();
    let idx: Vec<i32> = (0..b).map(|i| if i % 3 == 1 { -1 } else { ((i + 1) % nslots) as i32 }).collect();
    let csl_d = I32::new(cu, csl.clone());
    let idx_d = I32::new(cu, idx.clone());
    let outv = out.as_ref().map(|t| t.view()).unwrap_or(x.view());
    let plan = UpdatePlan {
        backend: Backend::Gpu,
        stream: 0,
        batch: b as i64,
        dim: d as i64,
        seqlen: s as i64,
        width: w as i64,
        state_len: sl as i64,
        num_slots: nslots as i64,
        act: if silu { Act::Silu } else { Act::None },
        x: x.view(),
        weight: weight.view(),
        bias: c.bias.map(|_| bias.view()),
        out: outv,
        conv_state: cs.view(),
        cache_seqlens: if cache { Some(csl_d.view(1, 0)) } else { None },
        conv_state_indices: if csi { Some(idx_d.view(1, 0)) } else { None },
    };
    let launches = update_launches(&plan, &cu.dev_info).unwrap();
    if let Some(want) = c.kernel {
        assert!(launches[0].kernel.starts_with(want), "ran on {}, not {want}", launches[0].kernel);
    }
    cu.run(&launches);
    // reference
    let ot: &T3 = out.as_ref().unwrap_or(&x);
    let mut want_out = if inplace { x.host.clone() } else { vec![f64::NAN; ot.host.len()] };
    let mut want_cs = cs.host.clone();
    for bi in 0..b {
        let slot = if csi { idx[bi] as i64 } else { bi as i64 };
        for di in 0..d {
            if slot < 0 {
                for si in 0..s {
                    want_out[ot.idx(bi, di, si)] = 0.0;
                }
                continue;
            }
            let st: Vec<f64> = (0..sl).map(|j| cs.at(slot as usize, di, j)).collect();
            let xs: Vec<f64> = (0..s).map(|j| x.at(bi, di, j)).collect();
            let win: Vec<f64> = if cache {
                let c = csl[bi] as i64;
                let prev: Vec<f64> = (0..k).map(|j| st[(c - k as i64 + j as i64).rem_euclid(sl as i64) as usize]).collect();
                prev.into_iter().chain(xs.iter().cloned()).collect()
            } else {
                st[sl - k..].iter().cloned().chain(xs.iter().cloned()).collect()
            };
            for si in 0..s {
                let mut a = if c.bias.is_some() { bias.at(di, 0, 0) } else { 0.0 };
                for j in 0..w {
                    a += weight.at(di, j, 0) * win[si + j];
                }
                want_out[ot.idx(bi, di, si)] = if silu { silu_f(a) } else { a };
            }
            if cache {
                let c = csl[bi] as i64;
                for si in 0..s {
                    want_cs[cs.idx(slot as usize, di, (c + si as i64).rem_euclid(sl as i64) as usize)] = xs[si];
                }
            } else {
                let full: Vec<f64> = st.iter().cloned().chain(xs.iter().cloned()).collect();
                for j in 0..sl {
                    want_cs[cs.idx(slot as usize, di, j)] = full[s + j];
                }
            }
        }
    }
    let (r1, _) = compare("update out", &ot.read(cu), &want_out, dt, 1.0);
    let (r2, _) = compare("conv_state", &cs.read(cu), &want_cs, dt, 1.0);
    format!("out {r1:.1e} state {r2:.1e}")
}

fn silu_f(z: f64) -> f64 {
    silu(z)
}

#[test]
#[ignore]
fn gpu_update() {
    with_gpu(|cu| {
        let mut n = 0;
        for dt in [DType::F32, DType::F16, DType::BF16] {
            for w in 1..=8usize {
                for (s, extra) in [(1usize, 0usize), (3, 2), (9, 1)] {
                    for cache in [false, true] {
                        for inplace in [false, true] {
                            n += 1;
                            let sl = w - 1 + extra.max(if w == 1 { 1 } else { 0 });
                            let name = format!("update {dt:?} W{w} S{s} sl{sl} cache{} inplace{}", cache as u8, inplace as u8);
                            run_case(&name, || check_update(cu, &UpdCase::basic(dt, 5, 130, s, w, sl, cache, n % 2 == 0, inplace, n % 3 == 0, n as u64)));
                        }
                    }
                }
            }
        }
    });
}

/// The register decode step (`ccv1d_stepv_*`, one token, state_len W-1 or W): every 16-bit case
/// must run on it, and every f32 case on fast-memory devices (elsewhere f32 reports the kernel it
/// ran on). Slots channel- and position-major with strides padded by 4 or 8 elements (channel-
/// major 16-bit at state_len 2, 4 and 8 with and without the 16-byte RUN; f32's RUN at state_len
/// 2 and 4 either way), a partial last channel tile (D = 1000: 250 of a block's 128 x 4 channels
/// in the second tile), an odd batch, blocks of 1 and of 3 rows (a row pair, then a lone row),
/// conv_state_indices with padding rows, in place, weights on the vector path (bf16, f32) and off
/// it (a padded or transposed weight), bias of either dtype, strided or absent.
#[test]
#[ignore]
fn gpu_update_stepv() {
    with_gpu(|cu| {
        let mut n = 0u64;
        for dt in [DType::F16, DType::BF16, DType::F32] {
            for w in 2..=8usize {
                for sl in [w - 1, w] {
                    for pm in [false, true] {
                        n += 1;
                        // on the H100 (a wave of 132 x 16 blocks; 2 channel tiles): 1 row per block
                        // below 1056 rows, 3 at 2401 (800 blocks of 3, then one of 1); the RUN's
                        // 2-channel threads twice that: 2, and 6 (a pass of 4 rows, then 2)
                        let b = if n % 4 == 0 { 2401 } else { 203 + 2 * (n as usize % 3) };
                        let d = 1000;
                        let mut c = UpdCase::basic(dt, b, d, 1, w, sl, false, n % 3 == 0, n % 5 == 0, n % 2 == 0, n);
                        // channel-major slot strides padded by 8 elements (16 bytes at 16 bits)
                        // take the RUN at 16-bit state_len 2, 4 and 8 (each dtype has W = 4 and 5
                        // at state_len 4 one with it, one without)
                        let pad = if (n / 2 + (dt == DType::BF16) as u64) % 2 == 0 { 8 } else { 4 };
                        c.x_s = [(d + pad) as i64, 1, 1];
                        c.out_s = [(d + 8) as i64, 1, 1];
                        c.cs_s = if pm { [((d + pad) * sl) as i64, 1, (d + pad) as i64] } else { [(d * sl + pad) as i64, sl as i64, 1] };
                        (c.w_dt, c.w_s) = match n % 4 {
                            0 => (DType::BF16, [w as i64, 1]),
                            1 => (DType::F32, [w as i64, 1]),
                            2 => (DType::F16, [w as i64 + 1, 1]),
                            _ => (dt, [1, d as i64]),
                        };
                        c.bias = [Some((dt, 1)), Some((DType::F32, 1)), Some((DType::F16, 2)), None][(n / 2 % 4) as usize];
                        c.kernel = (dt != DType::F32 || fast_memory(&cu.dev_info)).then_some("ccv1d_stepv_");
                        let name = format!("stepv {dt:?} W{w} sl{sl} pm{} B{b} csi{} inplace{} w{:?}{:?} bias{:?}", pm as u8, c.csi as u8, c.inplace as u8, c.w_dt, c.w_s, c.bias);
                        run_case(&name, || check_update(cu, &c));
                    }
                }
            }
        }
    });
}

/// Every exported name exists in the fatbin.
#[test]
#[ignore]
fn gpu_all_kernels_load() {
    with_gpu(|cu| {
        for n in all_kernel_names() {
            let name = CString::new(n.clone()).unwrap();
            let mut f = std::ptr::null_mut();
            cu.check(unsafe { (cu.get_fn)(&mut f, cu.module, name.as_ptr()) }, &format!("cuModuleGetFunction {n}"));
        }
    });
}

// ------------------------------------------------------------------ timing (not a check)

/// Times forward/backward at the DESIGN.md shapes against a device-to-device copy of the same
/// bytes. Prints only. `CCV1D_GPUTEST_BENCH=1` to run (inside `--ignored`).
#[test]
#[ignore]
fn gpu_bench() {
    if std::env::var("CCV1D_GPUTEST_BENCH").is_err() {
        return;
    }
    with_gpu(|cu| unsafe {
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW);
        let ev_create: unsafe extern "C" fn(*mut *mut c_void, u32) -> i32 = sym(lib, "cuEventCreate");
        let ev_record: unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32 = sym(lib, "cuEventRecord");
        let ev_sync: unsafe extern "C" fn(*mut c_void) -> i32 = sym(lib, "cuEventSynchronize");
        let ev_elapsed: unsafe extern "C" fn(*mut f32, *mut c_void, *mut c_void) -> i32 = sym(lib, "cuEventElapsedTime_v2");
        let dtod: unsafe extern "C" fn(u64, u64, usize) -> i32 = sym(lib, "cuMemcpyDtoD_v2");
        let get_fn = cu.get_fn;
        let launch = cu.launch;
        let (mut e0, mut e1) = (std::ptr::null_mut(), std::ptr::null_mut());
        ev_create(&mut e0, 0);
        ev_create(&mut e1, 0);
        let time = |f: &mut dyn FnMut()| -> f64 {
            for _ in 0..3 {
                f();
            }
            let reps = 20;
            ev_record(e0, std::ptr::null_mut());
            for _ in 0..reps {
                f();
            }
            ev_record(e1, std::ptr::null_mut());
            ev_sync(e1);
            let mut ms = 0f32;
            ev_elapsed(&mut ms, e0, e1);
            ms as f64 * 1e3 / reps as f64
        };
        let run_async = |ls: &[Launch]| {
            for l in ls {
                let name = CString::new(l.kernel.clone()).unwrap();
                let mut f = std::ptr::null_mut();
                get_fn(&mut f, cu.module, name.as_ptr());
                let mut params = l.params.clone();
                let mut args = [params.as_mut_ptr() as *mut c_void];
                launch(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], 0, std::ptr::null_mut(), args.as_mut_ptr(), std::ptr::null_mut());
            }
        };
        println!("{:<44} {:>9} {:>9} {:>9} {:>7} {:>9} {:>7}", "shape", "copy µs", "fwd µs", "fwd %", "", "bwd µs", "bwd %");
        for (dt, lay, b, d, l, w, silu) in [
            (DType::BF16, Lay::Cf, 4, 5376, 4096, 4, true),
            (DType::BF16, Lay::Cf, 4, 256, 4096, 4, true),
            (DType::BF16, Lay::Cl, 4, 5376, 4096, 4, true),
            (DType::BF16, Lay::Cl, 8, 2048, 1024, 4, true),
            (DType::BF16, Lay::Cl, 8, 2048, 1024, 4, false),
            (DType::F32, Lay::Cf, 4, 2048, 4096, 4, true),
            (DType::BF16, Lay::Cf, 1, 64, 128, 4, true),
        ] {
            let mut o = big(dt, lay, b, d, l, w);
            o.silu = silu;
            let c = build_conv(cu, &o);
            let (st, off) = strides_for([b, d, l], lay);
            let out = T3::new(cu, dt, [b, d, l], st, off, || 0.0);
            let dout = T3::new(cu, dt, [b, d, l], st, off, || 0.5);
            let dx = T3::new(cu, dt, [b, d, l], st, off, || 0.0);
            let dw = T3::new(cu, DType::F32, [d, w, 1], [w as i64, 1, 0], 0, || 0.0);
            let dbt = T3::new(cu, DType::F32, [d, 1, 1], [1, 0, 0], 0, || 0.0);
            let bytes = b * d * l * dt.size();
            let fp = FwdPlan { inp: conv_inputs(&c), out: out.view(), final_states: None };
            let fl = fwd_launches(&fp, &cu.dev_info).unwrap();
            let bp = BwdPlan {
                inp: conv_inputs(&c),
                dout: dout.view(),
                dfinal_states: None,
                dx: dx.view(),
                dweight: dw.view(),
                dbias: Some(dbt.view()),
                dinitial_states: None,
                workspace: None,
                deterministic: true,
            };
            let wsb = bwd_workspace_bytes(&bp, &cu.dev_info);
            let ws = cu.alloc(wsb + 256);
            let bl = bwd_launches(&bp, &cu.dev_info, ws as usize).unwrap();
            let copy = time(&mut || {
                dtod(out.dev, c.x.dev, bytes);
            });
            let tf = time(&mut || run_async(&fl));
            let tb = time(&mut || run_async(&bl));
            cu.check((cu.sync)(), "bench");
            // fwd moves 2 tensors (= one copy), bwd moves 3 (1.5 copies)
            println!(
                "{:<44} {:>9.1} {:>9.1} {:>8.0}% {:>7} {:>9.1} {:>6.0}%",
                format!("{dt:?} {lay:?} {b}x{d}x{l} W{w} silu{}", silu as u8),
                copy,
                tf,
                100.0 * copy / tf,
                "",
                tb,
                100.0 * 1.5 * copy / tb
            );
            (cu.mem_free)(ws);
            for t in [&c.x, &c.weight, &out, &dout, &dx, &dw, &dbt] {
                t.free(cu);
            }
        }
    });
}
