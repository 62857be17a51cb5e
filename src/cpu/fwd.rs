//! Forward: `out = act(conv(x) + bias)`, final states.

use std::array::from_fn;

use super::conv::{row_stride, cf_conv, cf_conv_masked, cl_tile, cl_window, dispatch_width, full_mask, zero_invalid, Conv, Job, Unit};
use super::elem::{load, prefetch, store, store_streaming, store_zeros, F32Rows};
use super::math::apply_act;
use super::pool::{self, zeroed};
use super::simd::{isa_twins, Isa};
use super::Cfg;
use crate::error::Result;
use crate::plan::{FwdPlan, View};

struct Scratch {
    /// Input window: K halo values (tokens) then a chunk (channel-first), or K halo rows then a
    /// tile of token rows (channel-last; rows `ncp` = block channels rounded up to 8 apart).
    xe: Vec<f32>,
    /// One output chunk (channel-first) or tile (channel-last).
    o: Vec<f32>,
    /// Channel-last: the block's weights transposed `[W][ncp]`, bias `[ncp]`, token masks.
    wt: Vec<f32>,
    bias: Vec<f32>,
    bits: Vec<u8>,
    ids: Vec<i32>,
    mask: Vec<u8>,
}

/// Outputs at least this large are written with streaming stores: they cannot stay in any
/// cache anyway, and plain stores would first read every output line from memory.
pub(super) const STREAM_OUT_BYTES: i64 = 64 << 20;

pub fn run(p: &FwdPlan, cfg: &Cfg) -> Result<()> {
    let cv = Conv::new(&p.inp)?;
    let out_bytes = p.inp.batch * p.inp.dim * p.inp.seqlen * p.out.dtype.size() as i64;
    let put: Put = if out_bytes >= STREAM_OUT_BYTES { store_streaming } else { store };
    let jobs = cv.jobs(cfg, &mut []);
    let cmax = jobs.iter().map(|j| j.c1 - j.c0).max().unwrap_or(0);
    let (w, k) = (cv.w, cv.k);
    let scratch = || -> Result<Scratch> {
        Ok(if cv.cl {
            let ncp = row_stride(cmax);
            Scratch {
                xe: zeroed((k + cfg.tile) * ncp, "fwd window")?,
                o: zeroed(cfg.tile * ncp, "fwd tile")?,
                wt: zeroed(w * ncp, "fwd weights")?,
                bias: zeroed(ncp, "fwd bias")?,
                bits: zeroed(cfg.tile, "fwd masks")?,
                ids: Vec::new(),
                mask: Vec::new(),
            }
        } else {
            Scratch {
                xe: zeroed(k + cfg.chunk, "fwd window")?,
                o: zeroed(cfg.chunk.max(k), "fwd chunk")?,
                wt: Vec::new(),
                bias: Vec::new(),
                bits: Vec::new(),
                ids: Vec::new(),
                mask: Vec::new(),
            }
        })
    };
    pool::run(jobs, cfg.threads, scratch, |s, job| dispatch_width!(w, job_fwd_pick(cfg.isa, &cv, p, cfg, put, s, &job)))
}

/// How `out` is written: [`store`] or [`store_streaming`].
type Put = fn(&View, i64, i64, &[f32]);

isa_twins!(job_fwd_pick, job_fwd, (cv: &Conv<'_>, p: &FwdPlan, cfg: &Cfg, put: Put, s: &mut Scratch, job: &Job<'_>) -> Result<()>);

#[inline(always)]
fn job_fwd<const W: usize>(cv: &Conv, p: &FwdPlan, cfg: &Cfg, put: Put, s: &mut Scratch, job: &Job) -> Result<()> {
    let nc = job.c1 - job.c0;
    if cv.cl {
        let ncp = row_stride(nc);
        for c in 0..nc {
            for kk in 0..W {
                s.wt[kk * ncp + c] = cv.wf[(job.c0 + c) * W + kk];
            }
            s.bias[c] = cv.bf[job.c0 + c];
        }
    }
    for u in &cv.units[job.u0..job.u1] {
        if u.slot < 0 {
            cv.zero_unit(&p.out, u, job.c0, job.c1);
            continue;
        }
        let masked = cv.masked();
        if masked {
            cv.mask(u, &mut s.ids, &mut s.mask)?;
        }
        if cv.cl {
            let mask = std::mem::take(&mut s.mask);
            cl_unit::<W>(cv, p, cfg.tile, cfg.isa, put, s, masked.then_some(&mask[..]), u, job.c0, nc);
            s.mask = mask;
        } else {
            let mask = masked.then_some(&s.mask[..]);
            for d in job.c0..job.c1 {
                let next = d + 1 < job.c1;
                match mask {
                    Some(m) => cf_row::<W, true>(cv, p, cfg.chunk, put, &mut s.xe, &mut s.o, m, u, d, next),
                    None => cf_row::<W, false>(cv, p, cfg.chunk, put, &mut s.xe, &mut s.o, &[], u, d, next),
                }
            }
        }
    }
    Ok(())
}

/// Channel-first: channel `d` of unit `u`, chunk by chunk over a sliding f32 window. While a
/// chunk is computed, the x of the next one (this row's, else channel `d+1`'s when `next`) is
/// prefetched.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn cf_row<const W: usize, const M: bool>(
    cv: &Conv,
    p: &FwdPlan,
    chunk: usize,
    put: Put,
    xe: &mut [f32],
    o: &mut [f32],
    mask: &[u8],
    u: &Unit,
    d: usize,
    next: bool,
) {
    let k = W - 1;
    let inp = cv.inp;
    let di = d as i64;
    let w: [f32; W] = from_fn(|kk| cv.wf[d * W + kk]);
    let bias = cv.bf[d];
    match (&inp.initial_states, u.has_init) {
        (Some(v), true) => load(v, u.slot * v.stride[0] + di * v.stride[1], v.stride[2], &mut xe[..k]),
        _ => xe[..k].fill(0.0),
    }
    let x = &inp.x;
    let xb = u.row * x.stride[0] + di * x.stride[1] + u.t0 * x.stride[2];
    let out = &p.out;
    let ob = u.row * out.stride[0] + di * out.stride[1] + u.t0 * out.stride[2];
    // f32 x with contiguous tokens is read in place: the window of a chunk's tokens [t, t+n)
    // (K tokens before them, then them) is x[t-K..t+n], except for the unit's first 8 tokens,
    // whose window starts in the initial state: they (and it) are copied into xe. (Needs
    // chunk ≥ 8 > K: every later chunk starts at t ≥ 8.) Other inputs are copied chunk by chunk.
    let xs = F32Rows::new(x, xb, 0, x.stride[2], u.len, 1).filter(|_| chunk >= 8).map(|r| r.row(0));
    let mut t = 0;
    while t < u.len {
        let n = (u.len - t).min(chunk);
        // Outputs [0, h) of the chunk from xe, [h, n) from x in place.
        let h = cf_chunk_window(xs, x, xb, t, n, k, xe);
        if t + n < u.len {
            prefetch(x, xb + (t + n) as i64 * x.stride[2], x.stride[2], (u.len - t - n).min(chunk));
        } else if next {
            prefetch(x, xb + x.stride[1], x.stride[2], u.len.min(chunk));
        }
        let o = &mut o[..n];
        let conv = |o: &mut [f32], i0: usize, win: &[f32]| {
            if M {
                cf_conv_masked::<W>(o, bias, &w, win, &mask[k + t + i0..k + t + i0 + o.len()]);
            } else {
                cf_conv::<W>(o, bias, &w, win);
            }
        };
        conv(&mut o[..h], 0, &xe[..k + h]);
        if let (Some(xs), true) = (xs, h < n) {
            conv(&mut o[h..], h, &xs[t + h - k..t + n]);
        }
        apply_act(inp.act, o);
        if M {
            zero_invalid(o, &mask[k + t..k + t + n]);
        }
        put(out, ob + t as i64 * out.stride[2], out.stride[2], o);
        if xs.is_none() {
            xe.copy_within(n..n + k, 0);
        }
        t += n;
    }
    // Tokens [len-K, len) (the halo when len < K; the initial state when 0): xe[..k] after
    // the copying loop; with x in place, x itself, or xe[len..len+K] when len < K (one chunk).
    let last = |j: usize| match xs {
        None => xe[j],
        Some(xs) if u.len >= k => xs[u.len - k + j],
        Some(_) => xe[u.len + j],
    };
    if let Some(f) = &p.final_states {
        let mut fin = [0f32; 8];
        for j in 0..k {
            let keep = !M || u.len == 0 || (mask[k + u.len - 1] >> (j + 1)) & 1 != 0;
            fin[j] = if keep { last(j) } else { 0.0 };
        }
        store(f, u.slot * f.stride[0] + di * f.stride[1], f.stride[2], &fin[..k]);
    }
}

/// Channel-last: channels `[c0, c0+nc)` of unit `u`, a tile of tokens at a time. `xe` holds K
/// halo rows then the tile's token rows, `ncp` floats apart.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn cl_unit<const W: usize>(
    cv: &Conv,
    p: &FwdPlan,
    tile: usize,
    isa: Isa,
    put: Put,
    s: &mut Scratch,
    mask: Option<&[u8]>,
    u: &Unit,
    c0: usize,
    nc: usize,
) {
    let k = W - 1;
    let inp = cv.inp;
    let c0i = c0 as i64;
    let ncp = row_stride(nc);
    let Scratch { xe, o, wt, bias, bits, .. } = s;
    let row = |i: usize| i * ncp..i * ncp + nc;
    match (&inp.initial_states, u.has_init) {
        (Some(v), true) => {
            for j in 0..k {
                let off = u.slot * v.stride[0] + c0i * v.stride[1] + j as i64 * v.stride[2];
                load(v, off, v.stride[1], &mut xe[row(j)]);
            }
        }
        _ => xe[..k * ncp].fill(0.0),
    }
    let x = &inp.x;
    let xb = u.row * x.stride[0] + c0i * x.stride[1] + u.t0 * x.stride[2];
    let out = &p.out;
    let ob = u.row * out.stride[0] + c0i * out.stride[1] + u.t0 * out.stride[2];
    let full = full_mask::<W>();
    // f32 x with contiguous rows of a multiple of 8 channels is read in place (window row of
    // token q ≥ 0: x row q; q < 0: halo row q + K of xe); other inputs are copied into xe a tile
    // at a time (K halo rows, then the tile's rows; the last K carried over).
    let xr = F32Rows::new(x, xb, x.stride[2], x.stride[1], nc, u.len).filter(|_| nc % 8 == 0);
    let nw = if xr.is_some() { nc } else { ncp };
    let mut t = 0;
    while t < u.len {
        let n = (u.len - t).min(tile);
        for i in 0..n {
            if xr.is_none() {
                load(x, xb + (t + i) as i64 * x.stride[2], x.stride[1], &mut xe[row(k + i)]);
            }
            bits[i] = mask.map_or(full, |m| m[k + t + i]);
        }
        let o = &mut o[..n * ncp];
        {
            let xe = &xe[..];
            let src = |r: usize| cl_window(xr, xe, t, r, k, ncp, nc);
            cl_tile::<W, false>(o, bias, wt, src, ncp, nw, &bits[..n], inp.act, isa == Isa::Avx512);
        }
        // Row by row while in cache: padding, store; and the next tile's x.
        for i in 0..n {
            let o = &mut o[row(i)];
            if bits[i] == 0 {
                o.fill(0.0);
            }
            put(out, ob + (t + i) as i64 * out.stride[2], out.stride[1], o);
            if xr.is_some() && t + n + i < u.len {
                prefetch(x, xb + (t + n + i) as i64 * x.stride[2], x.stride[1], nc);
            }
        }
        if xr.is_none() {
            xe.copy_within(n * ncp..(n + k) * ncp, 0);
        }
        t += n;
    }
    // Tokens len-K+j (after the copying loop xe rows 0..K hold them).
    cl_store_final(p, u, c0i, k, nc, mask, |j| &cl_window(xr, xe, u.len, j, k, ncp, nc)[..nc]);
}

/// Channel-last: final_states rows 0..K of the unit's channels from `rows(j)` (position len-K+j),
/// zeros where seq_idx says the position belongs to another sequence.
#[inline(always)]
fn cl_store_final<'a>(p: &FwdPlan, u: &Unit, c0i: i64, k: usize, nc: usize, mask: Option<&[u8]>, rows: impl Fn(usize) -> &'a [f32]) {
    if let Some(f) = &p.final_states {
        for j in 0..k {
            let keep = match mask {
                Some(m) if u.len > 0 => (m[k + u.len - 1] >> (j + 1)) & 1 != 0,
                _ => true,
            };
            let off = u.slot * f.stride[0] + c0i * f.stride[1] + j as i64 * f.stride[2];
            if keep {
                store(f, off, f.stride[1], rows(j));
            } else {
                store_zeros(f, off, f.stride[1], nc);
            }
        }
    }
}

/// Channel-first chunk of tokens [t, t+n): puts into xe[K..K+h] the x values its window cannot
/// read in place and returns h. With `xs` (f32 x with contiguous tokens, read in place) only the
/// unit's first 8 tokens are copied, after the initial state in xe[..K] (every later chunk starts
/// at t >= 8 > K); otherwise the whole chunk is copied.
#[inline(always)]
pub(super) fn cf_chunk_window(xs: Option<&[f32]>, x: &View, xb: i64, t: usize, n: usize, k: usize, xe: &mut [f32]) -> usize {
    match xs {
        Some(xs) if t == 0 => {
            let h = n.min(8);
            xe[k..k + h].copy_from_slice(&xs[..h]);
            h
        }
        Some(_) => 0,
        None => {
            load(x, xb + t as i64 * x.stride[2], x.stride[2], &mut xe[k..k + n]);
            n
        }
    }
}
