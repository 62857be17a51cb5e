//! What forward and backward share: the sequences of a call, its weights in f32, seq_idx masks,
//! the split into jobs, and the inner loops (monomorphised over the width `W`).

use super::elem::{idx1, idx2, load, store_zeros};
use super::pool::{grow, zeroed};
use super::Cfg;
use crate::error::Result;
use crate::plan::{ConvInputs, Seqs, View};

/// One sequence: tokens `[t0, t0+len)` of batch row `row`, its state slot (`< 0`: skipped) and
/// whether its initial state is read.
#[derive(Clone, Copy, Debug)]
pub struct Unit {
    pub row: i64,
    pub t0: i64,
    pub len: usize,
    pub slot: i64,
    pub has_init: bool,
}

/// A job: units `[u0, u1)` × channels `[c0, c1)`. `part` (backward only) receives this job's
/// dweight/dbias partial sums, `(c1-c0) × (W+1)` values, channel-major.
pub struct Job<'a> {
    pub u0: usize,
    pub u1: usize,
    pub c0: usize,
    pub c1: usize,
    pub part: &'a mut [f32],
}

/// The per-call context shared by forward and backward.
pub struct Conv<'a> {
    pub inp: &'a ConvInputs,
    /// Width W and K = W-1.
    pub w: usize,
    pub k: usize,
    pub dim: usize,
    pub units: Vec<Unit>,
    /// `[dim][W]` weights and `[dim]` bias (zeros when absent), converted once.
    pub wf: Vec<f32>,
    pub bf: Vec<f32>,
    /// Channel-last path (D-stride of x smaller than its L-stride).
    pub cl: bool,
    /// Units per row group (a job never spans groups); dweight partials are kept per group.
    pub group: usize,
}

/// Rows per partial-sum group, from the shape only (never from the thread count), so that the
/// dweight summation order is fixed. Bounds the partials buffer to ~2^18 × (W+1) floats.
fn rows_per_group(batch: usize, dim: usize) -> usize {
    let cap = 1usize << 18;
    let total = batch.saturating_mul(dim.max(1));
    total.div_ceil(cap).max(1)
}

impl<'a> Conv<'a> {
    pub fn new(inp: &'a ConvInputs) -> Result<Conv<'a>> {
        let w = inp.width as usize;
        let k = w - 1;
        let dim = inp.dim as usize;
        let pool = &inp.pool;
        let slot_of = |i: i64| match &pool.state_indices {
            Some(si) => idx1(si, i) as i64,
            None => i,
        };
        let init_of = |i: i64| match &pool.has_initial_state {
            Some(h) => idx1(h, i) != 0,
            None => true,
        };
        let n = inp.num_seqs().max(0) as usize;
        let mut units = Vec::new();
        units.try_reserve_exact(n).map_err(|_| super::pool::oom("sequences", n))?;
        for i in 0..n as i64 {
            let (row, t0, len) = match inp.seqs {
                Seqs::Rows => (i, 0, inp.seqlen),
                Seqs::Packed { cu_seqlens, .. } => {
                    let a = idx1(&cu_seqlens, i) as i64;
                    let b = idx1(&cu_seqlens, i + 1) as i64;
                    (0, a, b - a)
                }
            };
            units.push(Unit { row, t0, len: len.max(0) as usize, slot: slot_of(i), has_init: init_of(i) });
        }
        let mut wf = zeroed::<f32>(dim * w, "weights")?;
        for (d, row) in wf.chunks_exact_mut(w).enumerate() {
            load(&inp.weight, d as i64 * inp.weight.stride[0], inp.weight.stride[1], row);
        }
        let mut bf = zeroed::<f32>(dim, "bias")?;
        if let Some(b) = &inp.bias {
            load(b, 0, b.stride[0], &mut bf);
        }
        let xs = inp.x.stride;
        let cl = dim > 1 && xs[1].unsigned_abs() < xs[2].unsigned_abs();
        // Rows without state_indices own distinct slots and may run in parallel; otherwise
        // (packed, or slots chosen by the caller, possibly repeated) one job walks all units
        // in order for its channels.
        let group = match (inp.seqs, pool.state_indices) {
            (Seqs::Rows, None) => rows_per_group(n, dim),
            _ => n.max(1),
        };
        Ok(Conv { inp, w, k, dim, units, wf, bf, cl, group })
    }

    pub fn num_groups(&self) -> usize {
        self.units.len().div_ceil(self.group)
    }

    /// Channel blocks `[c0, c1)` covering `[0, dim)`, enough for the threads to share.
    pub fn blocks(&self, cfg: &Cfg) -> Vec<(usize, usize)> {
        let groups = self.num_groups().max(1);
        // A few jobs per thread for balance; channel-last prefers long contiguous rows.
        let per_thread = if self.cl { 2 } else { 4 };
        let want = if cfg.threads <= 1 { 1 } else { (per_thread * cfg.threads).div_ceil(groups) };
        let mut size = self.dim.div_ceil(want);
        if self.cl {
            if cfg.block >= 8 {
                size = size.next_multiple_of(8);
            }
            size = size.min(cfg.block);
        }
        let size = size.max(1);
        (0..self.dim).step_by(size).map(|c0| (c0, (c0 + size).min(self.dim))).collect()
    }

    /// Jobs for `parts` (`num_groups × dim × (W+1)` floats, or empty for forward).
    pub fn jobs<'p>(&self, cfg: &Cfg, parts: &'p mut [f32]) -> Vec<Job<'p>> {
        let blocks = self.blocks(cfg);
        let stride = if parts.is_empty() { 0 } else { self.w + 1 };
        let mut rest = parts;
        let mut jobs = Vec::with_capacity(self.num_groups() * blocks.len());
        for g in 0..self.num_groups() {
            let u0 = g * self.group;
            let u1 = (u0 + self.group).min(self.units.len());
            for &(c0, c1) in &blocks {
                let (part, r) = std::mem::take(&mut rest).split_at_mut((c1 - c0) * stride);
                rest = r;
                jobs.push(Job { u0, u1, c0, c1, part });
            }
        }
        jobs
    }

    /// A skipped sequence (slot < 0): its tokens of channels `[c0, c1)` in `o` (out or dx) are 0.
    pub fn zero_unit(&self, o: &View, u: &Unit, c0: usize, c1: usize) {
        let base = u.row * o.stride[0] + u.t0 * o.stride[2];
        if self.cl {
            for t in 0..u.len as i64 {
                store_zeros(o, base + t * o.stride[2] + c0 as i64 * o.stride[1], o.stride[1], c1 - c0);
            }
        } else {
            for d in c0..c1 {
                store_zeros(o, base + d as i64 * o.stride[1], o.stride[2], u.len);
            }
        }
    }

    pub fn masked(&self) -> bool {
        self.inp.seq_idx.is_some()
    }

    /// The seq_idx mask of a unit (only with seq_idx, so a whole batch row): `m` gets
    /// `len + 2K` bytes, `m[K + t]` for token `t` has bit `k` set iff
    /// `id(t-K+k) == id(t)`, and is 0 when `id(t) < 0` (a valid token always has bit K);
    /// the K bytes before and after are 0.
    pub fn mask(&self, u: &Unit, ids: &mut Vec<i32>, m: &mut Vec<u8>) -> Result<()> {
        let seq = self.inp.seq_idx.as_ref().expect("mask without seq_idx");
        let (k, len) = (self.k, u.len);
        grow(ids, len + k, "seq_idx")?;
        grow(m, len + 2 * k, "seq_idx mask")?;
        for t in 0..len {
            ids[k + t] = idx2(seq, u.row, u.t0 + t as i64);
        }
        let id0 = if len > 0 { ids[k] } else { 0 };
        ids[..k].fill(id0);
        m[..k].fill(0);
        m[k + len..len + 2 * k].fill(0);
        for t in 0..len {
            let id = ids[k + t];
            let mut bits = 0u8;
            if id >= 0 {
                for (kk, &other) in ids[t..t + k + 1].iter().enumerate() {
                    bits |= ((other == id) as u8) << kk;
                }
            }
            m[k + t] = bits;
        }
        Ok(())
    }
}

/// All W bits.
#[inline(always)]
pub fn full_mask<const W: usize>() -> u8 {
    ((1u16 << W) - 1) as u8
}

// ---------------------------------------------------------------------------------------------
// Channel-first inner loops: one channel, a run of tokens, scalar weights.

/// `o[i] = bias + Σ_k w[k]·xe[i+k]` (`xe` holds `K` halo values before the run).
#[inline(always)]
pub fn cf_conv<const W: usize>(o: &mut [f32], bias: f32, w: &[f32; W], xe: &[f32]) {
    let n = o.len();
    let xs: [&[f32]; W] = std::array::from_fn(|k| &xe[k..k + n]);
    for i in 0..n {
        let mut a = bias;
        for k in 0..W {
            a += w[k] * xs[k][i];
        }
        o[i] = a;
    }
}

/// As `cf_conv`, term `k` of token `i` kept only when bit `k` of `m[i]` is set.
#[inline(always)]
pub fn cf_conv_masked<const W: usize>(o: &mut [f32], bias: f32, w: &[f32; W], xe: &[f32], m: &[u8]) {
    let n = o.len();
    let m = &m[..n];
    let xs: [&[f32]; W] = std::array::from_fn(|k| &xe[k..k + n]);
    for i in 0..n {
        let mut a = bias;
        for k in 0..W {
            let v = w[k] * xs[k][i];
            a += if (m[i] >> k) & 1 != 0 { v } else { 0.0 };
        }
        o[i] = a;
    }
}

/// Zero `o[i]` where `m[i] == 0` (padding tokens).
#[inline(always)]
pub fn zero_invalid(o: &mut [f32], m: &[u8]) {
    let m = &m[..o.len()];
    for (v, &mi) in o.iter_mut().zip(m) {
        if mi == 0 {
            *v = 0.0;
        }
    }
}

/// Transposed conv for dx: `o[i] = Σ_k w[k]·g[i+K-k]` (`g` holds K values before the run),
/// term `k` kept (when `M`) only if bit `k` of `m[i+K-k]` is set — the mask of token
/// `q = p+K-k` at the position of `g[i+K-k]`.
#[inline(always)]
pub fn cf_dx<const W: usize, const M: bool>(o: &mut [f32], w: &[f32; W], g: &[f32], m: &[u8]) {
    let n = o.len();
    let k_ = W - 1;
    let gs: [&[f32]; W] = std::array::from_fn(|k| &g[k_ - k..k_ - k + n]);
    if M {
        let ms: [&[u8]; W] = std::array::from_fn(|k| &m[k_ - k..k_ - k + n]);
        for i in 0..n {
            let mut a = 0.0f32;
            for k in 0..W {
                let v = w[k] * gs[k][i];
                a += if (ms[k][i] >> k) & 1 != 0 { v } else { 0.0 };
            }
            o[i] = a;
        }
    } else {
        for i in 0..n {
            let mut a = 0.0f32;
            for k in 0..W {
                a += w[k] * gs[k][i];
            }
            o[i] = a;
        }
    }
}

/// `acc[i % 8] += g[i]·x[i]` over the run (8 fixed lanes: a vectorisable, fixed-order sum);
/// when `M`, the term counts only if bit `bit` of `m[i]` is set.
#[inline(always)]
pub fn lanes_dot<const M: bool>(acc: &mut [f32; 8], g: &[f32], x: &[f32], m: &[u8], bit: usize) {
    let n = g.len();
    let x = &x[..n];
    let full = n / 8 * 8;
    if M {
        let m = &m[..n];
        for ((gc, xc), mc) in g.chunks_exact(8).zip(x.chunks_exact(8)).zip(m.chunks_exact(8)) {
            for l in 0..8 {
                let v = gc[l] * xc[l];
                acc[l] += if (mc[l] >> bit) & 1 != 0 { v } else { 0.0 };
            }
        }
        for i in full..n {
            let v = g[i] * x[i];
            acc[i - full] += if (m[i] >> bit) & 1 != 0 { v } else { 0.0 };
        }
    } else {
        for (gc, xc) in g.chunks_exact(8).zip(x.chunks_exact(8)) {
            for l in 0..8 {
                acc[l] += gc[l] * xc[l];
            }
        }
        for i in full..n {
            acc[i - full] += g[i] * x[i];
        }
    }
}

/// `acc[i % 8] += g[i]`.
#[inline(always)]
pub fn lanes_sum(acc: &mut [f32; 8], g: &[f32]) {
    let n = g.len();
    let full = n / 8 * 8;
    for gc in g.chunks_exact(8) {
        for l in 0..8 {
            acc[l] += gc[l];
        }
    }
    for i in full..n {
        acc[i - full] += g[i];
    }
}

/// Fixed-order sum of the 8 lanes.
#[inline(always)]
pub fn lanes_total(a: &[f32; 8]) -> f32 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

// ---------------------------------------------------------------------------------------------
// Channel-last inner loops: a tile of token rows × a block of channels, rows `ncp` floats apart
// (`ncp` a multiple of 8; lanes past the block's channels are computed and never stored).
// Each loop walks the tokens and, per token, runs over the whole row with every operand
// re-sliced to `ncp` first, so the compiler drops the bounds checks and vectorises over the
// channels (8 lanes in the AVX2 build). Per element the sums run over k (and tokens) in order.

/// Row stride of a channel-last tile of `nc` channels: a multiple of 8, plus 8 so that rows of
/// power-of-two blocks do not all fall into the same cache sets.
pub fn row_stride(nc: usize) -> usize {
    nc.next_multiple_of(8) + 8
}

/// For each row `i < bits.len()`: `o[i] = init + Σ_k w[k] ⊙ src(r)`, with `r = i + k`
/// (convolution) or `r = i + K - k` (`REV`: the transposed convolution of dx). Term `k` only
/// where bit `k` of `bits[i]` is set; a row with `bits[i] == 0` gets `init`. Only the first
/// `nw` columns (a multiple of 8, ≤ `ncp`) are computed; `src(r)` is window row `r` (a scratch
/// row, or a row of the caller's x read in place), at least `nw` long.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn cl_tile<'s, const W: usize, const REV: bool>(
    o: &mut [f32],
    init: &[f32],
    w: &[f32],
    src: impl Fn(usize) -> &'s [f32],
    ncp: usize,
    nw: usize,
    bits: &[u8],
) {
    let full = full_mask::<W>();
    let row = |i: usize, kk: usize| if REV { i + W - 1 - kk } else { i + kk };
    // Rows as 8-lane groups (nw is a multiple of 8): no scalar remainder loop.
    let init = groups(&init[..nw]);
    // (Arrays filled by plain loops: `array::from_fn` with these closures was not inlined.)
    let mut wv: [&[[f32; 8]]; W] = [&[]; W];
    for (kk, wk) in wv.iter_mut().enumerate() {
        *wk = groups(&w[kk * ncp..][..nw]);
    }
    for (i, &bi) in bits.iter().enumerate() {
        let o = o[i * ncp..][..nw].as_chunks_mut::<8>().0;
        let mut xs: [&[[f32; 8]]; W] = [&[]; W];
        for (kk, xk) in xs.iter_mut().enumerate() {
            *xk = groups(&src(row(i, kk))[..nw]);
        }
        if bi == full {
            for c in 0..o.len() {
                let mut a = init[c];
                for kk in 0..W {
                    for l in 0..8 {
                        a[l] += wv[kk][c][l] * xs[kk][c][l];
                    }
                }
                o[c] = a;
            }
        } else {
            o.copy_from_slice(init);
            for kk in 0..W {
                if (bi >> kk) & 1 != 0 {
                    let (wk, xk) = (wv[kk], xs[kk]);
                    for c in 0..o.len() {
                        for l in 0..8 {
                            o[c][l] += wk[c][l] * xk[c][l];
                        }
                    }
                }
            }
        }
    }
}

/// `s` as 8-lane groups (its length is a multiple of 8).
#[inline(always)]
fn groups(s: &[f32]) -> &[[f32; 8]] {
    assert!(s.len() % 8 == 0);
    s.as_chunks::<8>().0
}

/// dweight/dbias of a tile: for row `i` (g row `K + i`, x rows `i..=i+K`) in order,
/// `dw[k] += g ⊙ x[i+k]` where bit `k` of `bits[i]` is set, `db += g` unless `bits[i] == 0`.
#[inline(always)]
pub fn cl_tile_dw<const W: usize>(dw: &mut [f32], db: &mut [f32], g: &[f32], x: &[f32], ncp: usize, bits: &[u8]) {
    let full = full_mask::<W>();
    let k = W - 1;
    let db = &mut db[..ncp];
    for (i, &bi) in bits.iter().enumerate() {
        if bi == 0 {
            continue;
        }
        let gr = &g[(k + i) * ncp..][..ncp];
        for kk in 0..W {
            if bi == full || (bi >> kk) & 1 != 0 {
                let xr = &x[(i + kk) * ncp..][..ncp];
                let d = &mut dw[kk * ncp..][..ncp];
                for c in 0..ncp {
                    d[c] += gr[c] * xr[c];
                }
            }
        }
        for c in 0..ncp {
            db[c] += gr[c];
        }
    }
}

/// [`cl_tile_dw`] for one token row: `g` (its length is the number of columns) and `x(k)`, the
/// x row of its term `k`.
#[inline(always)]
pub fn cl_row_dw<'s, const W: usize>(dw: &mut [f32], db: &mut [f32], g: &[f32], x: impl Fn(usize) -> &'s [f32], ncp: usize, bits: u8) {
    if bits == 0 {
        return;
    }
    let full = full_mask::<W>();
    let nw = g.len();
    for kk in 0..W {
        if bits == full || (bits >> kk) & 1 != 0 {
            let xr = &x(kk)[..nw];
            let d = &mut dw[kk * ncp..][..nw];
            for c in 0..nw {
                d[c] += g[c] * xr[c];
            }
        }
    }
    let db = &mut db[..nw];
    for c in 0..nw {
        db[c] += g[c];
    }
}

/// Channel-last rows read in place: how many token rows ahead x (and dout) are prefetched.
pub const CL_PREFETCH_ROWS: usize = 4;

/// `o[c] += a[c]`.
#[inline(always)]
pub fn add(o: &mut [f32], a: &[f32]) {
    let a = &a[..o.len()];
    for (o, a) in o.iter_mut().zip(a) {
        *o += *a;
    }
}

/// Call `$f::<W>($args)` for the run-time width `$w` (1..=8; validated).
macro_rules! dispatch_width {
    ($w:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $w {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            _ => $f::<8>($($arg),*),
        }
    };
}
pub(crate) use dispatch_width;
