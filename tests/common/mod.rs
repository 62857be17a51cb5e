//! Shared helpers of the integration tests: a tiny RNG, host/device tensors of any dtype and
//! layout, the case runner (seeds, case counts, failure report), and the builders that run one
//! forward / backward / update case through the C ABI and compare it with the f64 oracle.
//!
//! Environment:
//! - `CCV1D_TEST_BACKEND=cpu|gpu` (default cpu): backend code passed in every params struct;
//!   with `gpu` every buffer is device memory (`ccv1d_malloc` / `ccv1d_memcpy`).
//! - `CCV1D_TEST_CASES=N`: cases per sweep test (default in each test, modest for CI).
//! - `CCV1D_TEST_SEED=S`: base seed (default: fresh from the clock, printed on failure).
//! - `CCV1D_TEST_ONLY=I`: run only case I of each sweep (to reproduce a failure).
#![allow(dead_code)]

use std::cell::RefCell;
use std::ffi::{c_void, CStr};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use causal_conv1d::capi;
use causal_conv1d::error::CCV1D_OK;
use causal_conv1d::oracle::{self, ConvProblem, ErrStats, Tol, UpdateProblem};
use causal_conv1d::params::*;
use causal_conv1d::plan::DType;

// =============================================================================================
// RNG (splitmix64) and environment
// =============================================================================================

#[derive(Clone, Debug)]
pub struct Rng(u64);

pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(splitmix(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// A random value never near 0: ±[0.1, 1).
    pub fn value(&mut self) -> f64 {
        let m = 0.1 + 0.9 * self.unit();
        if self.chance(0.5) {
            -m
        } else {
            m
        }
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("{name}={s:?} is not a number")),
        Err(_) => default,
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Base seed: `CCV1D_TEST_SEED`, else fresh from the clock (printed with every failure).
pub fn base_seed() -> u64 {
    match std::env::var("CCV1D_TEST_SEED") {
        Ok(s) => parse_u64(&s).unwrap_or_else(|| panic!("CCV1D_TEST_SEED={s:?} is not a number")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    }
}

/// Backend code for every call: `CCV1D_TEST_BACKEND=cpu|gpu` (default cpu).
pub fn backend_code() -> i32 {
    match std::env::var("CCV1D_TEST_BACKEND").as_deref() {
        Err(_) | Ok("") | Ok("cpu") => CCV1D_BACKEND_CPU,
        Ok("gpu") => CCV1D_BACKEND_GPU,
        Ok(o) => panic!("CCV1D_TEST_BACKEND={o:?}: expected cpu or gpu"),
    }
}

pub fn on_gpu() -> bool {
    backend_code() == CCV1D_BACKEND_GPU
}

pub fn last_error() -> String {
    unsafe { CStr::from_ptr(capi::ccv1d_last_error()) }.to_string_lossy().into_owned()
}

pub fn status_str(s: i32) -> String {
    unsafe { CStr::from_ptr(capi::ccv1d_status_string(s)) }.to_string_lossy().into_owned()
}

/// OK, or an error naming the status and the library's message. On the GPU also synchronizes.
pub fn expect_ok(st: i32, what: &str) -> Result<(), String> {
    if st != CCV1D_OK {
        return Err(format!("{what} returned {} ({st}): {}", status_str(st), last_error()));
    }
    if on_gpu() {
        let s = unsafe { capi::ccv1d_synchronize(std::ptr::null_mut()) };
        if s != CCV1D_OK {
            return Err(format!("{what}: synchronize returned {}: {}", status_str(s), last_error()));
        }
    }
    Ok(())
}

// =============================================================================================
// Dtypes and layouts
// =============================================================================================

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dt {
    F32,
    F16,
    BF16,
    I32,
    Bool,
}

pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

impl Dt {
    pub fn code(self) -> i32 {
        match self {
            Dt::F32 => CCV1D_DTYPE_F32,
            Dt::F16 => CCV1D_DTYPE_F16,
            Dt::BF16 => CCV1D_DTYPE_BF16,
            Dt::I32 => CCV1D_DTYPE_I32,
            Dt::Bool => CCV1D_DTYPE_BOOL,
        }
    }
    pub fn size(self) -> usize {
        match self {
            Dt::F32 | Dt::I32 => 4,
            Dt::F16 | Dt::BF16 => 2,
            Dt::Bool => 1,
        }
    }
    pub fn float(self) -> DType {
        match self {
            Dt::F32 => DType::F32,
            Dt::F16 => DType::F16,
            Dt::BF16 => DType::BF16,
            o => panic!("{o:?} is not a float dtype"),
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, Dt::F32 | Dt::F16 | Dt::BF16)
    }
}

impl From<DType> for Dt {
    fn from(d: DType) -> Dt {
        match d {
            DType::F32 => Dt::F32,
            DType::F16 => Dt::F16,
            DType::BF16 => Dt::BF16,
        }
    }
}

/// How a tensor's logical dims map to memory: `order` lists the dims innermost first; `pad`
/// adds unused elements after each dim; `step` spaces the innermost dim; `offset` shifts the
/// first element (in elements) from the start of the allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub name: &'static str,
    pub order: Vec<usize>,
    pub pad: Vec<usize>,
    pub step: usize,
    pub offset: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Row-major dense (channel-first for `[B, D, L]`).
    Cf,
    /// Dim 1 innermost, then the last, then the first (channel-last for `[B, D, L]`).
    Cl,
    /// A non-contiguous slice of a wider tensor (padding, element step, offset, any order).
    Strided,
}

pub const KINDS: [Kind; 3] = [Kind::Cf, Kind::Cl, Kind::Strided];

impl Layout {
    pub fn cf(ndim: usize) -> Layout {
        Layout { name: "cf", order: (0..ndim).rev().collect(), pad: vec![0; ndim], step: 1, offset: 0 }
    }
    pub fn cl(ndim: usize) -> Layout {
        let order = match ndim {
            3 => vec![1, 2, 0],
            2 => vec![0, 1],
            _ => vec![0],
        };
        Layout { name: "cl", order, pad: vec![0; ndim], step: 1, offset: 0 }
    }
    /// A non-contiguous layout: base order cf, cl or any permutation; random padding of each
    /// dim, an element step of the innermost dim and an offset; never dense.
    pub fn strided(rng: &mut Rng, ndim: usize) -> Layout {
        let mut order = match rng.below(3) {
            0 => Layout::cf(ndim).order,
            1 => Layout::cl(ndim).order,
            _ => {
                let mut o: Vec<usize> = (0..ndim).collect();
                rng.shuffle(&mut o);
                o
            }
        };
        if ndim == 0 {
            order.clear();
        }
        let pad: Vec<usize> = (0..ndim).map(|_| if rng.chance(0.5) { rng.range(1, 3) } else { 0 }).collect();
        let mut step = if rng.chance(0.4) { rng.range(2, 3) } else { 1 };
        if step == 1 && pad.iter().all(|&p| p == 0) {
            step = 2;
        }
        Layout { name: "strided", order, pad, step, offset: rng.range(0, 7) }
    }
    pub fn of(kind: Kind, rng: &mut Rng, ndim: usize) -> Layout {
        match kind {
            Kind::Cf => Layout::cf(ndim),
            Kind::Cl => Layout::cl(ndim),
            Kind::Strided => Layout::strided(rng, ndim),
        }
    }
    pub fn random(rng: &mut Rng, ndim: usize) -> Layout {
        let k = rng.pick(&KINDS);
        Layout::of(k, rng, ndim)
    }
    /// Element strides for `shape` and the number of elements the allocation needs.
    pub fn strides(&self, shape: &[usize]) -> (Vec<i64>, usize) {
        let mut strides = vec![0i64; shape.len()];
        let mut s = self.step;
        for &i in &self.order {
            strides[i] = s as i64;
            s *= shape[i].max(1) + self.pad[i];
        }
        (strides, self.offset + s)
    }
}

// =============================================================================================
// Tensors (host, or device with a host mirror)
// =============================================================================================

struct Buf {
    /// 16-byte aligned host bytes (the mirror when on the device).
    host: Vec<u128>,
    nbytes: usize,
    dev: *mut c_void,
}

impl Buf {
    fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.host.as_ptr() as *const u8, self.nbytes) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.host.as_mut_ptr() as *mut u8, self.nbytes) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if !self.dev.is_null() {
            unsafe { capi::ccv1d_free(self.dev) };
        }
    }
}

/// A logical tensor (1 to 3 dims) over a buffer that it may share with other tensors
/// (aliasing, interleaving, overlap tests).
#[derive(Clone)]
pub struct Tensor {
    buf: Rc<RefCell<Buf>>,
    pub dt: Dt,
    pub shape: Vec<usize>,
    pub strides: Vec<i64>,
    /// Offset of element [0,..] from the start of the allocation, in elements of `dt`
    /// (includes the leading guard zone).
    pub offset: usize,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{:?}{:?} strides {:?} +{}", self.dt, self.shape, self.strides, self.offset)
    }
}

/// Byte every fresh allocation is filled with: gaps between elements read as huge finite
/// values (f32 1.5e16, f16 203, bf16 1.5e16), so a backend that reads outside a view is caught.
pub const GAP_BYTE: u8 = 0x5A;

/// Least bytes of guard zone before and after every allocation (it is as large as the tensor's
/// extent, up to 1 MiB; a multiple of 16 keeps the alignment).
pub const GUARD: usize = 64;

impl Tensor {
    /// A tensor in `lay`; device memory when the tests run on the GPU.
    pub fn new(dt: Dt, shape: &[usize], lay: &Layout) -> Tensor {
        Self::alloc(dt, shape, lay, on_gpu())
    }
    /// Always host memory (validation tests).
    pub fn host(dt: Dt, shape: &[usize], lay: &Layout) -> Tensor {
        Self::alloc(dt, shape, lay, false)
    }
    pub fn dense(dt: Dt, shape: &[usize]) -> Tensor {
        Self::new(dt, shape, &Layout::cf(shape.len()))
    }
    pub fn host_dense(dt: Dt, shape: &[usize]) -> Tensor {
        Self::host(dt, shape, &Layout::cf(shape.len()))
    }

    fn alloc(dt: Dt, shape: &[usize], lay: &Layout, device: bool) -> Tensor {
        assert_eq!(lay.order.len(), shape.len(), "layout rank");
        let (strides, elems) = lay.strides(shape);
        // Guard zones of GUARD bytes before and after the tensor's extent: an overrun lands
        // there (a gap, checked) instead of in another allocation.
        let guard = (elems * dt.size()).clamp(GUARD, 1 << 20).next_multiple_of(16) / dt.size();
        let nbytes = (elems + 2 * guard) * dt.size();
        let mut host = vec![0u128; nbytes.div_ceil(16)];
        let bytes = unsafe { std::slice::from_raw_parts_mut(host.as_mut_ptr() as *mut u8, nbytes) };
        bytes.fill(GAP_BYTE);
        let mut dev = std::ptr::null_mut();
        if device {
            let st = unsafe { capi::ccv1d_malloc(&mut dev, nbytes) };
            assert_eq!(st, CCV1D_OK, "ccv1d_malloc({nbytes}): {}", last_error());
        }
        Tensor { buf: Rc::new(RefCell::new(Buf { host, nbytes, dev })), dt, shape: shape.to_vec(), strides, offset: lay.offset + guard }
    }

    /// Another view of the same buffer.
    pub fn alias(&self, dt: Dt, offset: usize, shape: &[usize], strides: &[i64]) -> Tensor {
        Tensor { buf: self.buf.clone(), dt, shape: shape.to_vec(), strides: strides.to_vec(), offset }
    }
    pub fn same_buffer(&self, o: &Tensor) -> bool {
        Rc::ptr_eq(&self.buf, &o.buf)
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn nbytes(&self) -> usize {
        self.buf.borrow().nbytes
    }

    /// Call `f` with the offset (in elements of `dt`) of every logical element, row-major.
    pub fn visit(&self, mut f: impl FnMut(usize)) {
        let mut sh = [1usize; 3];
        let mut st = [0i64; 3];
        let nd = self.shape.len();
        sh[3 - nd..].copy_from_slice(&self.shape);
        st[3 - nd..].copy_from_slice(&self.strides);
        let base = self.offset as i64;
        for i in 0..sh[0] {
            let o0 = base + i as i64 * st[0];
            for j in 0..sh[1] {
                let o1 = o0 + j as i64 * st[1];
                for k in 0..sh[2] {
                    f((o1 + k as i64 * st[2]) as usize);
                }
            }
        }
    }

    /// Element offsets of every logical element, row-major.
    pub fn offsets(&self) -> Vec<usize> {
        let mut v = Vec::with_capacity(self.numel());
        self.visit(|o| v.push(o));
        v
    }

    fn read_at(dt: Dt, b: &[u8], off: usize) -> f64 {
        let p = off * dt.size();
        match dt {
            Dt::F32 => f32::from_le_bytes(b[p..p + 4].try_into().unwrap()) as f64,
            Dt::F16 => half::f16::from_bits(u16::from_le_bytes(b[p..p + 2].try_into().unwrap())).to_f64(),
            Dt::BF16 => half::bf16::from_bits(u16::from_le_bytes(b[p..p + 2].try_into().unwrap())).to_f64(),
            Dt::I32 => i32::from_le_bytes(b[p..p + 4].try_into().unwrap()) as f64,
            Dt::Bool => b[p] as f64,
        }
    }

    fn write_at(dt: Dt, b: &mut [u8], off: usize, v: f64) {
        let p = off * dt.size();
        match dt {
            Dt::F32 => b[p..p + 4].copy_from_slice(&(v as f32).to_le_bytes()),
            Dt::F16 => b[p..p + 2].copy_from_slice(&half::f16::from_f64(v).to_bits().to_le_bytes()),
            Dt::BF16 => b[p..p + 2].copy_from_slice(&half::bf16::from_f64(v).to_bits().to_le_bytes()),
            Dt::I32 => b[p..p + 4].copy_from_slice(&(v as i32).to_le_bytes()),
            Dt::Bool => b[p] = v as u8,
        }
    }

    /// Logical values as f64 (host mirror; call `download` first on the GPU).
    pub fn to_f64(&self) -> Vec<f64> {
        let buf = self.buf.borrow();
        let b = buf.bytes();
        let mut v = Vec::with_capacity(self.numel());
        self.visit(|o| v.push(Self::read_at(self.dt, b, o)));
        v
    }
    pub fn to_i32(&self) -> Vec<i32> {
        self.to_f64().into_iter().map(|v| v as i32).collect()
    }
    /// Store logical values (rounded to nearest-even into the dtype).
    pub fn set_f64(&self, vals: &[f64]) {
        assert_eq!(vals.len(), self.numel(), "set_f64: size");
        self.set_with(|i| vals[i]);
    }
    /// Store `f(i)` into logical element `i` (row-major), rounded into the dtype.
    pub fn set_with(&self, mut f: impl FnMut(usize) -> f64) {
        let mut buf = self.buf.borrow_mut();
        let b = buf.bytes_mut();
        let mut i = 0;
        self.visit(|o| {
            Self::write_at(self.dt, b, o, f(i));
            i += 1;
        });
    }
    pub fn set_i32(&self, vals: &[i32]) {
        self.set_f64(&vals.iter().map(|&v| v as f64).collect::<Vec<_>>());
    }
    /// Fill with fresh random values, never near zero (`scale`·±[0.1, 1)).
    pub fn fill_random(&self, rng: &mut Rng, scale: f64) {
        self.set_with(|_| scale * rng.value());
    }
    /// NaN in every logical element (floats only): an element the call fails to write stays NaN.
    pub fn poison(&self) {
        assert!(self.dt.is_float());
        self.set_with(|_| f64::NAN);
    }
    /// A copy of the whole allocation's bytes (host mirror).
    pub fn snapshot(&self) -> Vec<u8> {
        self.buf.borrow().bytes().to_vec()
    }
    /// Per logical element: do its bytes differ from `before` (a `snapshot`)?
    pub fn elems_changed(&self, before: &[u8]) -> Vec<bool> {
        let buf = self.buf.borrow();
        let b = buf.bytes();
        let sz = self.dt.size();
        let mut v = Vec::with_capacity(self.numel());
        self.visit(|o| v.push(b[o * sz..(o + 1) * sz] != before[o * sz..(o + 1) * sz]));
        v
    }
    /// Bytes of the allocation outside every one of `views` that changed since `before`.
    pub fn gaps_changed(views: &[&Tensor], before: &[u8]) -> usize {
        let buf = views[0].buf.borrow();
        let b = buf.bytes();
        let mut covered = vec![false; b.len()];
        for v in views {
            assert!(Rc::ptr_eq(&v.buf, &views[0].buf));
            let sz = v.dt.size();
            v.visit(|o| covered[o * sz..(o + 1) * sz].iter_mut().for_each(|c| *c = true));
        }
        (0..b.len()).filter(|&i| !covered[i] && b[i] != before[i]).count()
    }

    fn base_ptr(&self) -> *mut u8 {
        let buf = self.buf.borrow();
        if buf.dev.is_null() {
            buf.host.as_ptr() as *mut u8
        } else {
            buf.dev as *mut u8
        }
    }
    /// The C view of this tensor.
    pub fn view(&self) -> ccv1d_tensor {
        let mut stride = [0i64; 3];
        stride[..self.strides.len()].copy_from_slice(&self.strides);
        ccv1d_tensor { data: unsafe { self.base_ptr().add(self.offset * self.dt.size()) } as *mut c_void, dtype: self.dt.code(), stride }
    }
    /// Host memory → device (no-op on the CPU).
    pub fn upload(&self) {
        let buf = self.buf.borrow();
        if !buf.dev.is_null() {
            let st = unsafe { capi::ccv1d_memcpy(buf.dev, buf.host.as_ptr() as *const c_void, buf.nbytes, std::ptr::null_mut()) };
            assert_eq!(st, CCV1D_OK, "upload: {}", last_error());
            let st = unsafe { capi::ccv1d_synchronize(std::ptr::null_mut()) };
            assert_eq!(st, CCV1D_OK, "upload sync: {}", last_error());
        }
    }
    /// Device → host mirror (no-op on the CPU).
    pub fn download(&self) {
        let mut buf = self.buf.borrow_mut();
        if !buf.dev.is_null() {
            let (dev, n) = (buf.dev, buf.nbytes);
            let st = unsafe { capi::ccv1d_memcpy(buf.host.as_mut_ptr() as *mut c_void, dev, n, std::ptr::null_mut()) };
            assert_eq!(st, CCV1D_OK, "download: {}", last_error());
            let st = unsafe { capi::ccv1d_synchronize(std::ptr::null_mut()) };
            assert_eq!(st, CCV1D_OK, "download sync: {}", last_error());
        }
    }
}

pub fn opt_view(t: &Option<Tensor>) -> ccv1d_tensor {
    t.as_ref().map_or_else(ccv1d_tensor::default, |t| t.view())
}

// =============================================================================================
// Case runner
// =============================================================================================

thread_local! {
    static STATS: RefCell<Vec<(String, ErrStats)>> = const { RefCell::new(Vec::new()) };
}

/// Remember the worst errors seen under `key` (printed at the end of a sweep).
pub fn record(key: &str, e: &ErrStats) {
    STATS.with(|s| {
        let mut s = s.borrow_mut();
        match s.iter_mut().find(|(k, _)| k == key) {
            Some((_, x)) => {
                x.rel = x.rel.max(e.rel);
                x.max_elem = x.max_elem.max(e.max_elem);
                x.max_abs = x.max_abs.max(e.max_abs);
                x.n += e.n;
            }
            None => s.push((key.to_string(), *e)),
        }
    });
}

/// The worst errors recorded since the last call, by key.
pub fn take_stats() -> Vec<(String, ErrStats)> {
    STATS.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Run `default_cases` (or `CCV1D_TEST_CASES`) random cases of `f`; each gets its own seeded
/// RNG. All failures are collected; the test fails listing them with how to reproduce each.
pub fn sweep(name: &str, default_cases: usize, f: impl FnMut(&mut Rng, usize) -> Result<String, String>) {
    sweep_n(name, env_usize("CCV1D_TEST_CASES", default_cases), f)
}

/// [`sweep`] with a fixed number of cases (heavy tests that `CCV1D_TEST_CASES` must not scale).
pub fn sweep_n(name: &str, cases: usize, mut f: impl FnMut(&mut Rng, usize) -> Result<String, String>) {
    assert!(cases > 0, "CCV1D_TEST_CASES=0 would run nothing");
    let base = base_seed();
    let only = std::env::var("CCV1D_TEST_ONLY").ok().map(|s| s.parse::<usize>().expect("CCV1D_TEST_ONLY"));
    let name_hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| (h ^ c as u64).wrapping_mul(0x100_0000_01b3));
    take_stats();
    let mut failures = Vec::new();
    let mut ran = 0;
    for i in 0..cases {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut rng = Rng::new(base ^ name_hash ^ splitmix(i as u64));
        ran += 1;
        let res = catch_unwind(AssertUnwindSafe(|| f(&mut rng, i)));
        let err = match res {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => e,
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                format!("panic: {}", msg.unwrap_or_default())
            }
        };
        failures.push(format!("case {i}  (CCV1D_TEST_SEED={base} CCV1D_TEST_ONLY={i})\n    {err}"));
    }
    assert!(ran > 0, "CCV1D_TEST_ONLY selects no case (cases = {cases})");
    let mut report = format!("{name}: {ran} cases, seed {base}, backend {}\n", if on_gpu() { "gpu" } else { "cpu" });
    for (k, e) in take_stats() {
        let _ = writeln!(report, "  worst {k:<24} rel {:.2e}  max_abs {:.2e}  elem/bound {:.2}", e.rel, e.max_abs, e.max_elem);
    }
    println!("{report}");
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(12).collect();
        panic!(
            "{name}: {}/{ran} cases failed (seed {base}):\n{}\n{}",
            failures.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"),
            if failures.len() > shown.len() { format!("... and {} more", failures.len() - shown.len()) } else { String::new() }
        );
    }
}

// =============================================================================================
// Comparing outputs
// =============================================================================================

/// Elementwise output with a tolerance.
pub fn check_tensor(name: &str, t: &Tensor, want: &[f64], mag: &[f64], tol: Tol, key: &str) -> Result<ErrStats, String> {
    let e = oracle::check(name, &t.to_f64(), want, mag, &tol)?;
    record(key, &e);
    Ok(e)
}

/// A state pool `[slots, dim, k]`: slots in `written` compared with `want` (exactly when
/// `exact`: states are copies of stored inputs), every other slot's bytes unchanged since
/// `before`.
/// `mag`: the oracle's error magnitudes (unused when `exact`).
pub fn check_pool(name: &str, t: &Tensor, before: &[u8], want: &[f64], mag: &[f64], written: &[bool], exact: bool, tol: Tol, key: &str) -> Result<(), String> {
    let per = t.shape[1] * t.shape[2];
    if per == 0 {
        return Ok(());
    }
    let got = t.to_f64();
    let changed = t.elems_changed(before);
    let (mut g, mut w, mut m) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..got.len() {
        let slot = i / per;
        if written[slot] {
            g.push(got[i]);
            w.push(want[i]);
            m.push(if exact { 0.0 } else { mag[i] });
        } else if changed[i] {
            return Err(format!("{name}: slot {slot} (element {}) must be untouched but changed to {}", i % per, got[i]));
        }
    }
    if exact {
        if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
            return Err(format!("{name}: written element {i} is {} but must be exactly {} (a copy)", g[i], w[i]));
        }
        Ok(())
    } else {
        let e = oracle::check(name, &g, &w, &m, &tol)?;
        record(key, &e);
        Ok(())
    }
}

/// Every byte of `t`'s allocation equal to `before` (an input the call must not write).
pub fn check_unchanged(name: &str, t: &Tensor, before: &[u8]) -> Result<(), String> {
    let now = t.snapshot();
    if let Some(i) = (0..now.len()).find(|&i| now[i] != before[i]) {
        return Err(format!("{name}: input memory changed (byte {i} of {})", now.len()));
    }
    Ok(())
}

pub fn check_gaps(name: &str, views: &[&Tensor], before: &[u8]) -> Result<(), String> {
    let n = Tensor::gaps_changed(views, before);
    if n > 0 {
        return Err(format!("{name}: {n} bytes outside the view were written"));
    }
    Ok(())
}

// =============================================================================================
// Forward / backward cases
// =============================================================================================

/// One forward/backward configuration. Everything random about a case lives here (plus the
/// tensor values, drawn from the same RNG), so the seed reproduces it.
#[derive(Clone, Debug)]
pub struct ConvCfg {
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    pub width: usize,
    pub silu: bool,
    pub xdt: DType,
    pub wdt: DType,
    /// Bias dtype; None = no bias.
    pub bias: Option<DType>,
    pub seq_idx: Option<Vec<i32>>,
    pub cu_seqlens: Option<Vec<i32>>,
    pub state_indices: Option<Vec<i32>>,
    /// Raw has_initial_state values (nonzero = true) and their dtype (I32 or Bool).
    pub has_init: Option<(Vec<i32>, Dt)>,
    /// Pool size (the oracle's) and the `num_state_slots` field (0 = as many as sequences).
    pub slots: usize,
    pub num_state_slots: i64,
    pub initial: bool,
    pub fin: bool,
    /// final_states is the same memory as initial_states.
    pub alias: bool,
    // Backward only.
    pub dfinal: bool,
    pub dinit: bool,
    pub dw_dt: DType,
    /// dbias dtype; None = not requested.
    pub dbias: Option<DType>,
    pub nondet: bool,
    pub lay: ConvLayouts,
}

#[derive(Clone, Debug)]
pub struct ConvLayouts {
    pub x: Layout,
    pub out: Layout,
    pub w: Layout,
    pub b: Layout,
    pub seq: Layout,
    pub idx: Layout,
    pub init: Layout,
    pub fin: Layout,
    pub dout: Layout,
    pub dx: Layout,
    pub dfin: Layout,
    pub dinit: Layout,
    pub dw: Layout,
    pub db: Layout,
}

impl ConvLayouts {
    /// Every tensor in the same kind (x-like tensors) or dense (the small ones).
    pub fn uniform(kind: Kind, rng: &mut Rng) -> ConvLayouts {
        ConvLayouts {
            x: Layout::of(kind, rng, 3),
            out: Layout::of(kind, rng, 3),
            w: Layout::cf(2),
            b: Layout::cf(1),
            seq: Layout::cf(2),
            idx: Layout::cf(1),
            init: Layout::of(kind, rng, 3),
            fin: Layout::of(kind, rng, 3),
            dout: Layout::of(kind, rng, 3),
            dx: Layout::of(kind, rng, 3),
            dfin: Layout::of(kind, rng, 3),
            dinit: Layout::of(kind, rng, 3),
            dw: Layout::cf(2),
            db: Layout::cf(1),
        }
    }
    /// x in `kind`; every other tensor the same kind or, sometimes, any layout.
    pub fn random(kind: Kind, rng: &mut Rng) -> ConvLayouts {
        let pick3 = |rng: &mut Rng| if rng.chance(0.6) { Layout::of(kind, rng, 3) } else { Layout::random(rng, 3) };
        let x = Layout::of(kind, rng, 3);
        let out = pick3(rng);
        let init = pick3(rng);
        let fin = pick3(rng);
        let dout = pick3(rng);
        let dx = pick3(rng);
        let dfin = pick3(rng);
        let dinit = pick3(rng);
        ConvLayouts {
            x,
            out,
            w: Layout::random(rng, 2),
            b: Layout::random(rng, 1),
            seq: Layout::random(rng, 2),
            idx: Layout::random(rng, 1),
            init,
            fin,
            dout,
            dx,
            dfin,
            dinit,
            dw: Layout::random(rng, 2),
            db: Layout::random(rng, 1),
        }
    }
}

impl ConvCfg {
    /// A plain configuration: no optional feature, every tensor dense in `kind`.
    pub fn plain(batch: usize, dim: usize, seqlen: usize, width: usize, xdt: DType, kind: Kind, rng: &mut Rng) -> ConvCfg {
        ConvCfg {
            batch,
            dim,
            seqlen,
            width,
            silu: false,
            xdt,
            wdt: xdt,
            bias: Some(xdt),
            seq_idx: None,
            cu_seqlens: None,
            state_indices: None,
            has_init: None,
            slots: batch,
            num_state_slots: 0,
            initial: false,
            fin: false,
            alias: false,
            dfinal: false,
            dinit: false,
            dw_dt: DType::F32,
            dbias: Some(DType::F32),
            nondet: false,
            lay: ConvLayouts::uniform(kind, rng),
        }
    }
    pub fn num_seqs(&self) -> usize {
        self.cu_seqlens.as_ref().map_or(self.batch, |c| c.len() - 1)
    }
    pub fn k(&self) -> usize {
        self.width - 1
    }
    /// Tokens summed into dweight/dbias.
    pub fn tokens(&self) -> usize {
        self.batch * self.seqlen
    }
}

/// The tensors of a forward/backward case.
pub struct ConvTensors {
    pub x: Tensor,
    pub w: Tensor,
    pub b: Option<Tensor>,
    pub seq: Option<Tensor>,
    pub cu: Option<Tensor>,
    pub si: Option<Tensor>,
    pub hi: Option<Tensor>,
    pub init: Option<Tensor>,
    // Forward outputs.
    pub out: Option<Tensor>,
    pub fin: Option<Tensor>,
    // Backward.
    pub dout: Option<Tensor>,
    pub dfin: Option<Tensor>,
    pub dx: Option<Tensor>,
    pub dw: Option<Tensor>,
    pub db: Option<Tensor>,
    pub dinit: Option<Tensor>,
}

impl ConvTensors {
    pub fn build(c: &ConvCfg, rng: &mut Rng, bwd: bool) -> ConvTensors {
        let (b, d, l, w, k) = (c.batch, c.dim, c.seqlen, c.width, c.k());
        let xs = [b, d, l];
        let ss = [c.slots, d, k];
        let n = c.num_seqs();
        let x = Tensor::new(c.xdt.into(), &xs, &c.lay.x);
        x.fill_random(rng, 1.0);
        let wt = Tensor::new(c.wdt.into(), &[d, w], &c.lay.w);
        wt.fill_random(rng, 1.0);
        let bt = c.bias.map(|bd| {
            let t = Tensor::new(bd.into(), &[d], &c.lay.b);
            t.fill_random(rng, 0.5);
            t
        });
        let seq = c.seq_idx.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[b, l], &c.lay.seq);
            t.set_i32(v);
            t
        });
        let cu = c.cu_seqlens.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[n + 1], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let si = c.state_indices.as_ref().map(|v| {
            let t = Tensor::new(Dt::I32, &[n], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let hi = c.has_init.as_ref().map(|(v, dt)| {
            let t = Tensor::new(*dt, &[n], &c.lay.idx);
            t.set_i32(v);
            t
        });
        let init = c.initial.then(|| {
            let t = Tensor::new(c.xdt.into(), &ss, &c.lay.init);
            t.fill_random(rng, 1.0);
            t
        });
        let mut t = ConvTensors {
            x,
            w: wt,
            b: bt,
            seq,
            cu,
            si,
            hi,
            init,
            out: None,
            fin: None,
            dout: None,
            dfin: None,
            dx: None,
            dw: None,
            db: None,
            dinit: None,
        };
        if !bwd {
            let out = Tensor::new(c.xdt.into(), &xs, &c.lay.out);
            out.poison();
            t.out = Some(out);
            if c.fin {
                t.fin = Some(if c.alias {
                    t.init.as_ref().expect("alias needs initial").clone()
                } else {
                    let f = Tensor::new(c.xdt.into(), &ss, &c.lay.fin);
                    f.poison();
                    f
                });
            }
        } else {
            let dout = Tensor::new(c.xdt.into(), &xs, &c.lay.dout);
            dout.fill_random(rng, 1.0);
            t.dout = Some(dout);
            t.dfin = c.dfinal.then(|| {
                let f = Tensor::new(c.xdt.into(), &ss, &c.lay.dfin);
                f.fill_random(rng, 1.0);
                f
            });
            let dx = Tensor::new(c.xdt.into(), &xs, &c.lay.dx);
            dx.poison();
            t.dx = Some(dx);
            let dw = Tensor::new(c.dw_dt.into(), &[d, w], &c.lay.dw);
            dw.poison();
            t.dw = Some(dw);
            t.db = c.dbias.map(|dt| {
                let x = Tensor::new(dt.into(), &[d], &c.lay.db);
                x.poison();
                x
            });
            t.dinit = c.dinit.then(|| {
                let x = Tensor::new(c.xdt.into(), &ss, &c.lay.dinit);
                x.poison();
                x
            });
        }
        t
    }

    /// Inputs (never written by the call), by name.
    pub fn inputs(&self, c: &ConvCfg) -> Vec<(&'static str, &Tensor)> {
        let mut v = vec![("x", &self.x), ("weight", &self.w)];
        let opt = [
            ("bias", &self.b),
            ("seq_idx", &self.seq),
            ("cu_seqlens", &self.cu),
            ("state_indices", &self.si),
            ("has_initial_state", &self.hi),
            ("dout", &self.dout),
            ("dfinal_states", &self.dfin),
        ];
        for (n, t) in opt {
            if let Some(t) = t {
                v.push((n, t));
            }
        }
        if let Some(t) = &self.init {
            if !(c.alias && self.fin.is_some()) {
                v.push(("initial_states", t));
            }
        }
        v
    }
    pub fn outputs(&self) -> Vec<(&'static str, &Tensor)> {
        let opt = [
            ("out", &self.out),
            ("final_states", &self.fin),
            ("dx", &self.dx),
            ("dweight", &self.dw),
            ("dbias", &self.db),
            ("dinitial_states", &self.dinit),
        ];
        opt.into_iter().filter_map(|(n, t)| t.as_ref().map(|t| (n, t))).collect()
    }
    pub fn all(&self, c: &ConvCfg) -> Vec<(&'static str, &Tensor)> {
        let mut v = self.inputs(c);
        v.extend(self.outputs());
        v
    }
    pub fn upload(&self, c: &ConvCfg) {
        self.all(c).iter().for_each(|(_, t)| t.upload());
    }
    pub fn download(&self, c: &ConvCfg) {
        self.all(c).iter().for_each(|(_, t)| t.download());
    }

    pub fn fwd_params(&self, c: &ConvCfg) -> ccv1d_fwd_params {
        ccv1d_fwd_params {
            struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
            backend: backend_code(),
            activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: c.batch as i64,
            dim: c.dim as i64,
            seqlen: c.seqlen as i64,
            width: c.width as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: opt_view(&self.b),
            out: opt_view(&self.out),
            seq_idx: opt_view(&self.seq),
            initial_states: opt_view(&self.init),
            final_states: opt_view(&self.fin),
            cu_seqlens: opt_view(&self.cu),
            state_indices: opt_view(&self.si),
            has_initial_state: opt_view(&self.hi),
            num_seqs: if c.cu_seqlens.is_some() { c.num_seqs() as i64 } else { 0 },
            num_state_slots: c.num_state_slots,
        }
    }

    pub fn bwd_params(&self, c: &ConvCfg) -> ccv1d_bwd_params {
        ccv1d_bwd_params {
            struct_size: std::mem::size_of::<ccv1d_bwd_params>() as u32,
            backend: backend_code(),
            activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
            batch: c.batch as i64,
            dim: c.dim as i64,
            seqlen: c.seqlen as i64,
            width: c.width as i64,
            x: self.x.view(),
            weight: self.w.view(),
            bias: opt_view(&self.b),
            seq_idx: opt_view(&self.seq),
            initial_states: opt_view(&self.init),
            cu_seqlens: opt_view(&self.cu),
            state_indices: opt_view(&self.si),
            has_initial_state: opt_view(&self.hi),
            num_seqs: if c.cu_seqlens.is_some() { c.num_seqs() as i64 } else { 0 },
            num_state_slots: c.num_state_slots,
            dout: opt_view(&self.dout),
            dfinal_states: opt_view(&self.dfin),
            dx: opt_view(&self.dx),
            dweight: opt_view(&self.dw),
            dbias: opt_view(&self.db),
            dinitial_states: opt_view(&self.dinit),
            workspace: std::ptr::null_mut(),
            workspace_size: 0,
            nondeterministic: c.nondet as i32,
        }
    }

    /// The oracle's problem, from the values as stored (call before the library writes).
    pub fn problem(&self, c: &ConvCfg) -> ConvProblem {
        ConvProblem {
            batch: c.batch,
            dim: c.dim,
            seqlen: c.seqlen,
            width: c.width,
            silu: c.silu,
            x: self.x.to_f64(),
            weight: self.w.to_f64(),
            bias: self.b.as_ref().map(|t| t.to_f64()),
            seq_idx: self.seq.as_ref().map(|t| t.to_i32()),
            initial_states: self.init.as_ref().map(|t| t.to_f64()),
            cu_seqlens: self.cu.as_ref().map(|t| t.to_i32()),
            state_indices: self.si.as_ref().map(|t| t.to_i32()),
            has_initial_state: self.hi.as_ref().map(|t| t.to_i32().into_iter().map(|v| v != 0).collect()),
            num_slots: c.slots,
        }
    }
}

fn snapshots(v: &[(&'static str, &Tensor)]) -> Vec<Vec<u8>> {
    v.iter().map(|(_, t)| t.snapshot()).collect()
}

/// Run one forward case through the C ABI and compare with the oracle.
pub fn run_fwd(c: &ConvCfg, rng: &mut Rng) -> Result<String, String> {
    let t = ConvTensors::build(c, rng, false);
    let prob = t.problem(c);
    let ins = t.inputs(c);
    let outs = t.outputs();
    let in_before = snapshots(&ins);
    let out_before = snapshots(&outs);
    t.upload(c);
    let p = t.fwd_params(c);
    expect_ok(unsafe { capi::ccv1d_fwd(&p, std::ptr::null_mut()) }, "ccv1d_fwd")?;
    t.download(c);
    let r = oracle::forward(&prob);
    let xn = c.xdt.name();
    let e = check_tensor("out", t.out.as_ref().unwrap(), &r.out, &r.out_mag, Tol::elementwise(c.xdt), &format!("fwd out {xn}"))?;
    if let Some(fin) = &t.fin {
        let before = &out_before[outs.iter().position(|(n, _)| *n == "final_states").unwrap()];
        check_pool("final_states", fin, before, &r.final_states, &[], &r.final_written, true, Tol::elementwise(c.xdt), "")?;
    }
    for (i, (n, tt)) in ins.iter().enumerate() {
        check_unchanged(n, tt, &in_before[i])?;
    }
    for (i, (n, tt)) in outs.iter().enumerate() {
        check_gaps(n, &[tt], &out_before[i])?;
    }
    Ok(format!("out rel {:.2e}", e.rel))
}

/// Run one backward case through the C ABI and compare with the oracle.
pub fn run_bwd(c: &ConvCfg, rng: &mut Rng) -> Result<String, String> {
    let t = ConvTensors::build(c, rng, true);
    let prob = t.problem(c);
    let dout = t.dout.as_ref().unwrap().to_f64();
    let dfin = t.dfin.as_ref().map(|f| f.to_f64());
    let ins = t.inputs(c);
    let outs = t.outputs();
    let in_before = snapshots(&ins);
    let out_before = snapshots(&outs);
    t.upload(c);
    let p = t.bwd_params(c);
    expect_ok(unsafe { capi::ccv1d_bwd(&p, std::ptr::null_mut()) }, "ccv1d_bwd")?;
    t.download(c);
    let r = oracle::backward(&prob, &dout, dfin.as_deref());
    let xn = c.xdt.name();
    let n = c.tokens();
    let ex = check_tensor("dx", t.dx.as_ref().unwrap(), &r.dx, &r.dx_mag, Tol::elementwise(c.xdt), &format!("bwd dx {xn}"))?;
    let ew = check_tensor(
        "dweight",
        t.dw.as_ref().unwrap(),
        &r.dweight,
        &r.dweight_mag,
        Tol::reduction(c.dw_dt, n),
        &format!("bwd dweight {}", c.dw_dt.name()),
    )?;
    let mut msg = format!("dx rel {:.2e} dweight rel {:.2e}", ex.rel, ew.rel);
    if let (Some(db), Some(dt)) = (&t.db, c.dbias) {
        let e = check_tensor("dbias", db, &r.dbias, &r.dbias_mag, Tol::reduction(dt, n), &format!("bwd dbias {}", dt.name()))?;
        let _ = write!(msg, " dbias rel {:.2e}", e.rel);
    }
    if let Some(di) = &t.dinit {
        let before = &out_before[outs.iter().position(|(n, _)| *n == "dinitial_states").unwrap()];
        check_pool("dinitial_states", di, before, &r.dinitial_states, &r.dinit_mag, &r.dinit_written, false, Tol::elementwise(c.xdt), &format!("bwd dinit {xn}"))?;
    }
    for (i, (n, tt)) in ins.iter().enumerate() {
        check_unchanged(n, tt, &in_before[i])?;
    }
    for (i, (n, tt)) in outs.iter().enumerate() {
        check_gaps(n, &[tt], &out_before[i])?;
    }
    Ok(msg)
}

// =============================================================================================
// Update cases
// =============================================================================================

#[derive(Clone, Debug)]
pub struct UpdCfg {
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    pub width: usize,
    pub state_len: usize,
    pub silu: bool,
    pub xdt: DType,
    pub wdt: DType,
    pub bias: Option<DType>,
    pub slots: usize,
    pub num_state_slots: i64,
    pub cache_seqlens: Option<Vec<i32>>,
    pub indices: Option<Vec<i32>>,
    /// out is x (same memory).
    pub in_place: bool,
    pub lay_x: Layout,
    pub lay_out: Layout,
    pub lay_w: Layout,
    pub lay_b: Layout,
    pub lay_state: Layout,
    pub lay_idx: Layout,
}

pub fn run_update(c: &UpdCfg, rng: &mut Rng) -> Result<String, String> {
    let (b, d, s, w) = (c.batch, c.dim, c.seqlen, c.width);
    let x = Tensor::new(c.xdt.into(), &[b, d, s], &c.lay_x);
    x.fill_random(rng, 1.0);
    let wt = Tensor::new(c.wdt.into(), &[d, w], &c.lay_w);
    wt.fill_random(rng, 1.0);
    let bt = c.bias.map(|bd| {
        let t = Tensor::new(bd.into(), &[d], &c.lay_b);
        t.fill_random(rng, 0.5);
        t
    });
    let state = Tensor::new(c.xdt.into(), &[c.slots, d, c.state_len], &c.lay_state);
    state.fill_random(rng, 1.0);
    let cs = c.cache_seqlens.as_ref().map(|v| {
        let t = Tensor::new(Dt::I32, &[b], &c.lay_idx);
        t.set_i32(v);
        t
    });
    let ci = c.indices.as_ref().map(|v| {
        let t = Tensor::new(Dt::I32, &[b], &c.lay_idx);
        t.set_i32(v);
        t
    });
    let out = if c.in_place {
        x.clone()
    } else {
        let o = Tensor::new(c.xdt.into(), &[b, d, s], &c.lay_out);
        o.poison();
        o
    };
    let prob = UpdateProblem {
        batch: b,
        dim: d,
        seqlen: s,
        width: w,
        state_len: c.state_len,
        silu: c.silu,
        x: x.to_f64(),
        weight: wt.to_f64(),
        bias: bt.as_ref().map(|t| t.to_f64()),
        conv_state: state.to_f64(),
        cache_seqlens: c.cache_seqlens.clone(),
        conv_state_indices: c.indices.clone(),
        num_slots: c.slots,
    };
    let mut ins: Vec<(&str, &Tensor)> = vec![("weight", &wt)];
    if !c.in_place {
        ins.push(("x", &x));
    }
    for (n, t) in [("bias", &bt), ("cache_seqlens", &cs), ("conv_state_indices", &ci)] {
        if let Some(t) = t {
            ins.push((n, t));
        }
    }
    let in_before: Vec<Vec<u8>> = ins.iter().map(|(_, t)| t.snapshot()).collect();
    let out_before = out.snapshot();
    let state_before = state.snapshot();
    for t in ins.iter().map(|(_, t)| *t).chain([&out, &state]) {
        t.upload();
    }
    let p = ccv1d_update_params {
        struct_size: std::mem::size_of::<ccv1d_update_params>() as u32,
        backend: backend_code(),
        activation: if c.silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
        batch: b as i64,
        dim: d as i64,
        seqlen: s as i64,
        width: w as i64,
        state_len: c.state_len as i64,
        num_state_slots: c.num_state_slots,
        x: x.view(),
        weight: wt.view(),
        bias: opt_view(&bt),
        out: out.view(),
        conv_state: state.view(),
        cache_seqlens: opt_view(&cs),
        conv_state_indices: opt_view(&ci),
    };
    expect_ok(unsafe { capi::ccv1d_update(&p, std::ptr::null_mut()) }, "ccv1d_update")?;
    for t in ins.iter().map(|(_, t)| *t).chain([&out, &state]) {
        t.download();
    }
    let r = oracle::update(&prob);
    let e = check_tensor("out", &out, &r.out, &r.out_mag, Tol::elementwise(c.xdt), &format!("update out {}", c.xdt.name()))?;
    // Written slots: exact copies; the others (padding rows, unused slots) untouched.
    check_pool("conv_state", &state, &state_before, &r.conv_state, &[], &r.written, true, Tol::elementwise(c.xdt), "")?;
    for (i, (n, t)) in ins.iter().enumerate() {
        check_unchanged(n, t, &in_before[i])?;
    }
    check_gaps("out", &[&out], &out_before)?;
    check_gaps("conv_state", &[&state], &state_before)?;
    Ok(format!("out rel {:.2e}", e.rel))
}

/// A forward params struct with the dims set and every tensor absent.
pub fn fwd_params_base(batch: usize, dim: usize, seqlen: usize, width: usize, silu: bool) -> ccv1d_fwd_params {
    let z = ccv1d_tensor::default();
    ccv1d_fwd_params {
        struct_size: std::mem::size_of::<ccv1d_fwd_params>() as u32,
        backend: backend_code(),
        activation: if silu { CCV1D_ACT_SILU } else { CCV1D_ACT_NONE },
        batch: batch as i64,
        dim: dim as i64,
        seqlen: seqlen as i64,
        width: width as i64,
        x: z,
        weight: z,
        bias: z,
        out: z,
        seq_idx: z,
        initial_states: z,
        final_states: z,
        cu_seqlens: z,
        state_indices: z,
        has_initial_state: z,
        num_seqs: 0,
        num_state_slots: 0,
    }
}
