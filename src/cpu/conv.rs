//! What forward and backward share: the sequences of a call, its weights in f32, seq_idx masks,
//! the split into jobs, and the inner loops (monomorphised over the width `W`).

use super::elem::{idx1, idx2, load, store_zeros, F32Rows};
use super::math::{apply_act, mul_dact};
use super::pool::{grow, zeroed};
use super::Cfg;
use crate::error::Result;
use crate::plan::{Act, ConvInputs, Seqs, View};

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
// Each loop walks columns: a group of 8, 16 or 32 channels (`[f32; L]` values the compiler
// keeps in vector registers) slides down the tile's rows. Per element the sums run over k
// (and tokens) in order, the same operations as the channel-first loops.

/// Row stride of a channel-last tile of `nc` channels: a multiple of 8, plus 8 so that rows of
/// power-of-two blocks do not all fall into the same cache sets.
pub fn row_stride(nc: usize) -> usize {
    nc.next_multiple_of(8) + 8
}

/// For each row `i < bits.len()`: `o[i] = init + Σ_k w[k] ⊙ src(r)`, with `r = i + k`
/// (convolution) or `r = i + K - k` (`REV`: the transposed convolution of dx). Term `k` only
/// where bit `k` of `bits[i]` is set; a row with `bits[i] == 0` gets `init`. Only the first
/// `nw` columns (a multiple of 8, ≤ `ncp`) are computed; `src(r)` is window row `r` (a scratch
/// row, or a row of the caller's x read in place), at least `nw` long. `act` is applied to each
/// result before it is stored (the forward's activation while it is in registers).
///
/// Walks columns: for each group of 32 (with `wide`), 16 or 8 channels the weights and the last
/// W window values stay in registers while it slides down the rows, so each window row is read
/// once per group instead of W times, and the W weight rows once per tile instead of once per row.
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
    act: Act,
    wide: bool,
) {
    for (p, bp) in bits.chunks(CL_COLS).enumerate() {
        let i0 = p * CL_COLS;
        let rows = cl_rows::<W>(&src, i0, bp.len(), nw);
        let (o, rows) = (&mut o[i0 * ncp..], &rows[..bp.len() + W - 1]);
        // 32-channel groups only where 32 registers hold their weights and window (AVX-512):
        // two independent SiLU chains per step.
        let c32 = if wide { nw / 32 * 32 } else { 0 };
        for c in (0..c32).step_by(32) {
            cl_cols::<W, REV, 32>(o, init, w, rows, ncp, c, bp, act);
        }
        let mut c = c32;
        while c + 16 <= nw {
            cl_cols::<W, REV, 16>(o, init, w, rows, ncp, c, bp, act);
            c += 16;
        }
        if c < nw {
            cl_cols::<W, REV, 8>(o, init, w, rows, ncp, c, bp, act);
        }
    }
}

/// Rows per column walk.
const CL_COLS: usize = 32;

/// Window rows `src(i0 + r)[..nw]`, `r < n + K`, of the `n ≤ CL_COLS` rows from `i0` (the rest
/// empty). Callers walk their rows in such pieces (no closure here: a closure that is not
/// inlined loses the `#[target_feature]` of the wide instantiations).
#[inline(always)]
fn cl_rows<'s, const W: usize>(src: &impl Fn(usize) -> &'s [f32], i0: usize, n: usize, nw: usize) -> [&'s [f32]; CL_COLS + 8] {
    assert!(nw % 8 == 0);
    let mut rows: [&[f32]; CL_COLS + 8] = [&[]; CL_COLS + 8];
    for (r, row) in rows[..n + W - 1].iter_mut().enumerate() {
        *row = &src(i0 + r)[..nw];
    }
    rows
}

/// `s[c..c+L]` by value.
#[inline(always)]
fn lanes<const L: usize>(s: &[f32], c: usize) -> [f32; L] {
    *s[c..c + L].as_chunks::<L>().0.first().unwrap()
}

/// Columns `[c, c+L)` of [`cl_tile`] for the rows of `bits` (window rows `rows`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn cl_cols<const W: usize, const REV: bool, const L: usize>(o: &mut [f32], init: &[f32], w: &[f32], rows: &[&[f32]], ncp: usize, c: usize, bits: &[u8], act: Act) {
    let full = full_mask::<W>();
    let a0 = lanes::<L>(init, c);
    let mut wk = [[0f32; L]; W];
    for (kk, v) in wk.iter_mut().enumerate() {
        *v = lanes(&w[kk * ncp..], c);
    }
    // xw[j]: window row i + j of output row i.
    let mut xw = [[0f32; L]; W];
    for j in 1..W {
        xw[j] = lanes(rows[j - 1], c);
    }
    for (i, &b) in bits.iter().enumerate() {
        for j in 1..W {
            xw[j - 1] = xw[j];
        }
        xw[W - 1] = lanes(rows[i + W - 1], c);
        let mut a = a0;
        for kk in 0..W {
            if b == full || (b >> kk) & 1 != 0 {
                let x = &xw[if REV { W - 1 - kk } else { kk }];
                for l in 0..L {
                    a[l] += wk[kk][l] * x[l];
                }
            }
        }
        apply_act(act, &mut a);
        o[i * ncp + c..][..L].copy_from_slice(&a);
    }
}

/// The backward of channel-last rows `i < bits.len()` (tokens t+i) in one column walk. Row `i`:
/// `pre = bias + Σ_k w[k] ⊙ x(i+k)` (terms by `bits[i]`, x window rows `x(r)`, `r < n + K`),
/// `g = dout(i)·act'(pre)` (0 where `bits[i] == 0`), `dw[k] += g ⊙ x(i+k)` where bit `k` is set
/// and `db += g` unless `bits[i] == 0` (in row order; `dw` is `[W][ncp]`), and dx row `i`
/// (position t-K+i) `= Σ_k w[k] ⊙ g(t+i-k)` (terms by `dbits[i]`). `gc` holds the g rows of
/// the K tokens before the tile and gets those of its last K. Columns `[0, nw)`; per column
/// group the weights, sums and the last W values of x and g stay in registers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn cl_tile_bwd<'s, const W: usize>(
    dx: &mut [f32],
    gc: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    wb: (&[f32], &[f32]),
    x: impl Fn(usize) -> &'s [f32],
    dout: impl Fn(usize) -> &'s [f32],
    ncp: usize,
    nw: usize,
    bits: &[u8],
    dbits: &[u8],
    act: Act,
) {
    for (p, bp) in bits.chunks(CL_COLS).enumerate() {
        let i0 = p * CL_COLS;
        let xs = cl_rows::<W>(&x, i0, bp.len(), nw);
        let ys = cl_rows::<1>(&dout, i0, bp.len(), nw);
        let rows = (&xs[..bp.len() + W - 1], &ys[..bp.len()]);
        let (dx, dbp) = (&mut dx[i0 * ncp..], &dbits[i0..i0 + bp.len()]);
        let c16 = nw / 16 * 16;
        for c in (0..c16).step_by(16) {
            cl_cols_bwd::<W, 16>(dx, gc, dw, db, wb, rows, ncp, c, bp, dbp, act);
        }
        if c16 < nw {
            cl_cols_bwd::<W, 8>(dx, gc, dw, db, wb, rows, ncp, c16, bp, dbp, act);
        }
    }
}

/// Columns `[c, c+L)` of [`cl_tile_bwd`]; `rows` = (x window rows, dout rows).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn cl_cols_bwd<const W: usize, const L: usize>(
    dx: &mut [f32],
    gc: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    (w, bias): (&[f32], &[f32]),
    (xs, ys): (&[&[f32]], &[&[f32]]),
    ncp: usize,
    c: usize,
    bits: &[u8],
    dbits: &[u8],
    act: Act,
) {
    let full = full_mask::<W>();
    let k = W - 1;
    let b0 = lanes::<L>(bias, c);
    let (mut wk, mut d) = ([[0f32; L]; W], [[0f32; L]; W]);
    for kk in 0..W {
        wk[kk] = lanes(&w[kk * ncp..], c);
        d[kk] = lanes(&dw[kk * ncp..], c);
    }
    let mut s = lanes::<L>(db, c);
    // xw[j] / gw[j]: x / g of token t+i-K+j at row i.
    let (mut xw, mut gw) = ([[0f32; L]; W], [[0f32; L]; W]);
    for j in 1..W {
        xw[j] = lanes(xs[j - 1], c);
        gw[j] = lanes(&gc[(j - 1) * ncp..], c);
    }
    for (i, (&b, &bd)) in bits.iter().zip(dbits).enumerate() {
        for j in 1..W {
            xw[j - 1] = xw[j];
            gw[j - 1] = gw[j];
        }
        xw[k] = lanes(xs[i + k], c);
        let mut pre = b0;
        let mut g = lanes::<L>(ys[i], c);
        if b == 0 {
            g = [0.0; L];
        } else {
            if act != Act::None {
                for kk in 0..W {
                    if b == full || (b >> kk) & 1 != 0 {
                        for l in 0..L {
                            pre[l] += wk[kk][l] * xw[kk][l];
                        }
                    }
                }
                mul_dact(act, &mut g, &pre);
            }
            for kk in 0..W {
                if b == full || (b >> kk) & 1 != 0 {
                    for l in 0..L {
                        d[kk][l] += g[l] * xw[kk][l];
                    }
                }
            }
            for l in 0..L {
                s[l] += g[l];
            }
        }
        gw[k] = g;
        let mut o = [0f32; L];
        for kk in 0..W {
            if bd == full || (bd >> kk) & 1 != 0 {
                for l in 0..L {
                    o[l] += wk[kk][l] * gw[k - kk][l];
                }
            }
        }
        dx[i * ncp + c..][..L].copy_from_slice(&o);
    }
    for kk in 0..W {
        dw[kk * ncp + c..][..L].copy_from_slice(&d[kk]);
    }
    db[c..c + L].copy_from_slice(&s);
    for j in 1..W {
        gc[(j - 1) * ncp + c..][..L].copy_from_slice(&gw[j]);
    }
}

/// Window row `r` of a channel-last tile starting at token `t` (token `t - K + r`): with `xr`
/// (x read in place, `nc` wide) x row `t + r - K`, or halo row `t + r` of `xe` before token 0;
/// without, row `r` of `xe` (K carried rows, then the tile's copied rows; `ncp` wide).
#[inline(always)]
pub fn cl_window<'a>(xr: Option<F32Rows<'a>>, xe: &'a [f32], t: usize, r: usize, k: usize, ncp: usize, nc: usize) -> &'a [f32] {
    match xr {
        Some(xr) if t + r >= k => xr.row(t + r - k),
        Some(_) => &xe[(t + r) * ncp..][..nc],
        None => &xe[r * ncp..][..ncp],
    }
}

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
