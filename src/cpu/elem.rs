//! Element access: the only place that touches the caller's memory.
//!
//! Every function here reads or writes elements `off + i·step` (`i < n`) of a validated view.
//! Soundness of the raw accesses rests on what `validate.rs` guarantees for every plan:
//! * each element a backend addresses through a view lies inside the caller's allocation for
//!   that tensor (dims × strides checked against the tensor, offsets fit in i64);
//! * no output overlaps an input or another output, except the documented exact aliases
//!   (initial_states == final_states, update's out == x), and the backend reads such a row
//!   completely before it writes it (see fwd.rs / update.rs);
//! * worker threads write disjoint elements (each (row, channel) belongs to one job).
//!
//! So no element is written by one thread while another reads or writes it, and every
//! reference built below lives only for the duration of one copy.
//!
//! Contiguous runs go through slices (bulk copy / vectorised half conversion) when the address
//! is aligned for the dtype; anything else uses unaligned single-element reads and writes.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use crate::plan::{DType, IdxView, View};

/// Address of element offset `off` (in elements) of `v`.
#[inline]
fn addr_of(addr: usize, off: i64, size: usize) -> usize {
    (addr as i64).wrapping_add(off.wrapping_mul(size as i64)) as usize
}

/// The f16 and bf16 arms of [`load`]: they differ only in the type.
macro_rules! load_half {
    ($t:ty, $base:expr, $step:expr, $contiguous:expr, $dst:expr) => {
        if $contiguous {
            // SAFETY: n in-bounds elements of the view (module doc); a 2-byte POD, base 2-aligned.
            let s = unsafe { std::slice::from_raw_parts($base as *const $t, $dst.len()) };
            s.convert_to_f32_slice($dst);
        } else {
            for (i, d) in $dst.iter_mut().enumerate() {
                let a = addr_of($base, i as i64 * $step, 2);
                // SAFETY: in-bounds element of the view (module doc); unaligned read.
                *d = <$t>::from_bits(unsafe { std::ptr::read_unaligned(a as *const u16) }).to_f32();
            }
        }
    };
}

/// The f16 and bf16 arms of [`store`].
macro_rules! store_half {
    ($t:ty, $base:expr, $step:expr, $contiguous:expr, $src:expr) => {
        if $contiguous {
            // SAFETY: n in-bounds elements only this job writes (module doc); 2-aligned.
            let d = unsafe { std::slice::from_raw_parts_mut($base as *mut $t, $src.len()) };
            d.convert_from_f32_slice($src);
        } else {
            for (i, s) in $src.iter().enumerate() {
                let a = addr_of($base, i as i64 * $step, 2);
                // SAFETY: in-bounds element only this job writes (module doc).
                unsafe { std::ptr::write_unaligned(a as *mut u16, <$t>::from_f32(*s).to_bits()) };
            }
        }
    };
}

/// `dst[i] = v[off + i·step]` converted to f32.
pub fn load(v: &View, off: i64, step: i64, dst: &mut [f32]) {
    let n = dst.len();
    if n == 0 {
        return;
    }
    let size = v.dtype.size();
    let base = addr_of(v.addr, off, size);
    let contiguous = (step == 1 || n == 1) && base % size == 0;
    match v.dtype {
        DType::F32 => {
            if contiguous {
                // SAFETY: n in-bounds, aligned, unaliased-by-writers elements (module doc).
                let s = unsafe { std::slice::from_raw_parts(base as *const f32, n) };
                dst.copy_from_slice(s);
            } else {
                for (i, d) in dst.iter_mut().enumerate() {
                    let a = addr_of(base, i as i64 * step, 4);
                    // SAFETY: in-bounds element of the view (module doc); unaligned read.
                    *d = unsafe { std::ptr::read_unaligned(a as *const f32) };
                }
            }
        }
        DType::F16 => load_half!(f16, base, step, contiguous, dst),
        DType::BF16 => load_half!(bf16, base, step, contiguous, dst),
    }
}

/// `v[off + i·step] = src[i]`, rounded once (round-to-nearest-even) to the view's dtype.
pub fn store(v: &View, off: i64, step: i64, src: &[f32]) {
    let n = src.len();
    if n == 0 {
        return;
    }
    let size = v.dtype.size();
    let base = addr_of(v.addr, off, size);
    let contiguous = (step == 1 || n == 1) && base % size == 0;
    match v.dtype {
        DType::F32 => {
            if contiguous {
                // SAFETY: n in-bounds, aligned elements that only this job touches (module doc).
                let d = unsafe { std::slice::from_raw_parts_mut(base as *mut f32, n) };
                d.copy_from_slice(src);
            } else {
                for (i, s) in src.iter().enumerate() {
                    let a = addr_of(base, i as i64 * step, 4);
                    // SAFETY: in-bounds element only this job writes (module doc).
                    unsafe { std::ptr::write_unaligned(a as *mut f32, *s) };
                }
            }
        }
        DType::F16 => store_half!(f16, base, step, contiguous, src),
        DType::BF16 => store_half!(bf16, base, step, contiguous, src),
    }
}

/// [`store`] for outputs far larger than the caches: contiguous, 16-byte aligned f32 runs are
/// written with non-temporal stores, which skip reading each destination line first (a third
/// memory stream for a pure write). Everything else, and non-x86 targets, goes through `store`.
pub fn store_streaming(v: &View, off: i64, step: i64, src: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_loadu_ps, _mm_sfence, _mm_stream_ps};
        let base = addr_of(v.addr, off, 4);
        if v.dtype == DType::F32 && step == 1 && src.len() >= 16 && base % 4 == 0 {
            if super::simd::best() == super::simd::Isa::Avx512 && src.len() >= 32 {
                // SAFETY: the CPU has AVX-512F (simd::best); same bounds as below.
                unsafe { stream_avx512(v, off, base, src) };
                return;
            }
            let head = ((16 - base % 16) % 16) / 4;
            store(v, off, 1, &src[..head]);
            let body = (src.len() - head) / 4 * 4;
            for i in (head..head + body).step_by(4) {
                // SAFETY: SSE is baseline on x86_64; `base + 4i` is 16-byte aligned and the four
                // elements are in bounds and written by this job only (module doc).
                unsafe { _mm_stream_ps((base + 4 * i) as *mut f32, _mm_loadu_ps(src.as_ptr().add(i))) };
            }
            store(v, off + (head + body) as i64, 1, &src[head + body..]);
            // Order the weakly-ordered streaming stores before anything this thread does next.
            unsafe { _mm_sfence() };
            return;
        }
    }
    store(v, off, step, src)
}

/// Ask the CPU to start loading elements `off .. off + n` of `v` (contiguous, `step == 1`) into
/// its caches: the lines of a row that the current job reads next, so that their memory latency
/// overlaps the work on the current row. A hint only: it reads no value and cannot fault, so it
/// changes no result. Does nothing for other steps and off x86_64.
#[inline(always)]
pub fn prefetch(v: &View, off: i64, step: i64, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if step == 1 && n > 0 {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let size = v.dtype.size();
        let a = addr_of(v.addr, off, size);
        let end = a.wrapping_add(n * size);
        let mut line = a & !63;
        // SAFETY (all four): PREFETCHh is a hint: it never faults, whatever the address, and
        // writes nothing.
        while line.wrapping_add(192) < end {
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(line as *const i8);
                _mm_prefetch::<_MM_HINT_T1>((line + 64) as *const i8);
                _mm_prefetch::<_MM_HINT_T1>((line + 128) as *const i8);
                _mm_prefetch::<_MM_HINT_T1>((line + 192) as *const i8);
            }
            line += 256;
        }
        while line < end {
            unsafe { _mm_prefetch::<_MM_HINT_T1>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, off, step, n);
}

/// Rows of `n` contiguous f32 elements of a view, read in place (no copy): row `r` is elements
/// `off + r·row_step + i` (`i < n`, `r < rows`). Only for inputs, which no thread writes while a
/// call runs (module doc: no output overlaps x or dout in forward / backward).
#[derive(Clone, Copy)]
pub struct F32Rows<'a> {
    base: usize,
    row_step: i64,
    n: usize,
    rows: usize,
    _view: std::marker::PhantomData<&'a View>,
}

impl<'a> F32Rows<'a> {
    /// `None` unless the view is f32, the rows are contiguous (`step == 1`) and 4-byte aligned.
    pub fn new(v: &'a View, off: i64, row_step: i64, step: i64, n: usize, rows: usize) -> Option<F32Rows<'a>> {
        let base = addr_of(v.addr, off, 4);
        (v.dtype == DType::F32 && (step == 1 || n <= 1) && base % 4 == 0).then_some(F32Rows {
            base,
            row_step,
            n,
            rows,
            _view: std::marker::PhantomData,
        })
    }

    /// Row `r` (`r < rows`).
    #[inline(always)]
    pub fn row(&self, r: usize) -> &'a [f32] {
        assert!(r < self.rows);
        let a = addr_of(self.base, r as i64 * self.row_step, 4);
        // SAFETY: n in-bounds, aligned elements of an input view that nobody writes during the
        // call (module doc); the reference lives no longer than the borrow of the view.
        unsafe { std::slice::from_raw_parts(a as *const f32, self.n) }
    }
}

/// The body of [`store_streaming`] with 64-byte non-temporal stores (whole cache lines).
/// Safety: the CPU has AVX-512F; `src.len() ≥ 32`, f32 view, `step == 1`, `base` (the address
/// of element `off`) 4-byte aligned.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_avx512(v: &View, off: i64, base: usize, src: &[f32]) {
    use std::arch::x86_64::{_mm512_loadu_ps, _mm512_stream_ps, _mm_sfence};
    let head = ((64 - base % 64) % 64) / 4;
    store(v, off, 1, &src[..head]);
    let body = (src.len() - head) / 16 * 16;
    for i in (head..head + body).step_by(16) {
        // SAFETY: `base + 4i` is 64-byte aligned and the 16 elements are in bounds and written
        // by this job only (module doc).
        unsafe { _mm512_stream_ps((base + 4 * i) as *mut f32, _mm512_loadu_ps(src.as_ptr().add(i))) };
    }
    store(v, off + (head + body) as i64, 1, &src[head + body..]);
    // Order the weakly-ordered streaming stores before anything this thread does next.
    _mm_sfence();
}

/// Write `n` zeros at `v[off + i·step]`.
pub fn store_zeros(v: &View, off: i64, step: i64, n: usize) {
    const Z: [f32; 256] = [0.0; 256];
    let mut i = 0;
    while i < n {
        let m = (n - i).min(Z.len());
        store(v, off + i as i64 * step, step, &Z[..m]);
        i += m;
    }
}

/// Element `i` of a 1-D index tensor (int32, or 1-byte bool read as 0/1).
#[inline]
pub fn idx1(v: &IdxView, i: i64) -> i32 {
    idx_at(v, i.wrapping_mul(v.stride[0]))
}

/// Element `[i, j]` of a 2-D int32 index tensor.
#[inline]
pub fn idx2(v: &IdxView, i: i64, j: i64) -> i32 {
    idx_at(v, i.wrapping_mul(v.stride[0]).wrapping_add(j.wrapping_mul(v.stride[1])))
}

#[inline]
fn idx_at(v: &IdxView, off: i64) -> i32 {
    if v.elem_bytes == 1 {
        let a = addr_of(v.addr, off, 1);
        // SAFETY: in-bounds element of a host index tensor (validated); nobody writes it.
        unsafe { std::ptr::read_unaligned(a as *const u8) as i32 }
    } else {
        let a = addr_of(v.addr, off, 4);
        // SAFETY: in-bounds element of a host index tensor (validated); nobody writes it.
        unsafe { std::ptr::read_unaligned(a as *const i32) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streaming stores write exactly what `store` writes, for every alignment of the start and
    /// every length (head, 16-byte body, tail), and nothing outside the run.
    #[test]
    fn store_streaming_matches_store() {
        let src: Vec<f32> = (0..100).map(|i| i as f32 * 0.5 - 7.0).collect();
        for start in 0..8usize {
            for n in [0usize, 1, 3, 15, 16, 17, 33, 64, 77] {
                let mut a = vec![f32::NAN; 128];
                let mut b = vec![f32::NAN; 128];
                for (buf, streaming) in [(&mut a, false), (&mut b, true)] {
                    let v = View { addr: buf.as_mut_ptr() as usize, dtype: DType::F32, stride: [0; 3] };
                    if streaming {
                        store_streaming(&v, start as i64, 1, &src[..n]);
                    } else {
                        store(&v, start as i64, 1, &src[..n]);
                    }
                }
                assert_eq!(
                    a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "start {start} n {n}"
                );
                assert!(b[start..start + n].iter().zip(&src).all(|(x, y)| x == y));
            }
        }
    }
}
