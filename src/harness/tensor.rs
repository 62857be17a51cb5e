//! Dtypes, layouts, and tensors of any dtype and layout in host memory or in device memory with a
//! host mirror, each allocation surrounded by guard zones and filled with a gap byte.

use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use super::rng::Rng;
use super::{last_error, on_gpu};
use crate::capi;
use crate::error::CCV1D_OK;
use crate::params::*;
use crate::plan::DType;

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
