//! Backward: dx, dweight, dbias, dinitial_states (SiLU recomputes the pre-activation).
//!
//! dx of token `p` needs g of tokens `p..=p+K`, so dx runs K tokens behind g: a chunk of tokens
//! `[t, t+n)` yields g for those tokens and dx for `[t-K, t-K+n)`; a final flush yields dx for
//! the last K positions (where dfinal_states enters). Positions `< 0` are dinitial_states.
//!
//! dweight/dbias: every job writes its own partial sums per (row group, channel) — in a fixed
//! order that depends on the shape only — and one pass sums the groups in order, so the
//! result is bitwise the same for any thread count.

use std::array::from_fn;

use super::conv::{row_stride, add, cf_conv, cf_conv_masked, cf_dx, cl_tile, cl_tile_bwd, cl_window, dispatch_width, full_mask,
    lanes_dot, lanes_sum, lanes_total, zero_invalid, Conv, Job, Unit,
};
use super::elem::{load, prefetch, store, store_streaming, store_zeros, F32Rows};
use super::fwd::{cf_chunk_window, STREAM_OUT_BYTES};
use super::math::{mul_dact, mul_dact_to};
use super::pool::{self, zeroed};
use super::simd::isa_twins;
use super::Cfg;
use crate::error::Result;
use crate::plan::{Act, BwdPlan, View};

struct Scratch {
    /// Input window: K halo values / rows, then the chunk (channel-first) or tile (channel-last).
    xe: Vec<f32>,
    /// g window: K earlier values, then the chunk (channel-first; at least 2K long); channel-last:
    /// the g rows of the K tokens before the tile.
    g: Vec<f32>,
    /// Pre-activation chunk (channel-first); channel-last: dout rows of a tile copied from
    /// inputs that are not read in place.
    pre: Vec<f32>,
    /// dx chunk / tile.
    dx: Vec<f32>,
    /// Channel-last (rows of `ncp` = block channels rounded up to 8): dinitial rows `[K]`, a
    /// dfinal row, zeros, weights `[W]`, bias, the job's dweight `[W]` / dbias accumulators,
    /// and per-token masks for g and dx.
    dinit: Vec<f32>,
    tmp: Vec<f32>,
    zeros: Vec<f32>,
    wt: Vec<f32>,
    bias: Vec<f32>,
    dw: Vec<f32>,
    db: Vec<f32>,
    bits: Vec<u8>,
    dbits: Vec<u8>,
    ids: Vec<i32>,
    mask: Vec<u8>,
    /// How dx is written: [`store`], or [`store_streaming`] when dx is far larger than the
    /// caches (plain stores would first read every dx line: a fourth memory stream).
    put_dx: fn(&View, i64, i64, &[f32]),
}

pub fn run(p: &BwdPlan, cfg: &Cfg) -> Result<()> {
    let cv = Conv::new(&p.inp)?;
    let (w, k, dim) = (cv.w, cv.k, cv.dim);
    let mut parts = zeroed::<f32>(cv.num_groups() * dim * (w + 1), "dweight partials")?;
    let jobs = cv.jobs(cfg, &mut parts);
    let cmax = jobs.iter().map(|j| j.c1 - j.c0).max().unwrap_or(0);
    let dx_bytes = p.inp.batch * p.inp.dim * p.inp.seqlen * p.dx.dtype.size() as i64;
    let put_dx: fn(&View, i64, i64, &[f32]) = if dx_bytes >= STREAM_OUT_BYTES { store_streaming } else { store };
    let scratch = || -> Result<Scratch> {
        Ok(if cv.cl {
            let ncp = row_stride(cmax);
            let rows = cfg.tile.max(k);
            Scratch {
                xe: zeroed((k + cfg.tile) * ncp, "bwd x window")?,
                g: zeroed(k * ncp, "bwd g rows")?,
                pre: zeroed(cfg.tile * ncp, "bwd dout tile")?,
                dx: zeroed(rows * ncp, "bwd dx")?,
                dinit: zeroed(k * ncp, "bwd dinit")?,
                tmp: zeroed(ncp, "bwd dfinal")?,
                zeros: zeroed(ncp, "bwd zeros")?,
                wt: zeroed(w * ncp, "bwd weights")?,
                bias: zeroed(ncp, "bwd bias")?,
                dw: zeroed(w * ncp, "bwd dweight")?,
                db: zeroed(ncp, "bwd dbias")?,
                bits: zeroed(rows, "bwd masks")?,
                dbits: zeroed(rows, "bwd masks")?,
                ids: Vec::new(),
                mask: Vec::new(),
                put_dx,
            }
        } else {
            let n = cfg.chunk.max(k);
            Scratch {
                xe: zeroed(k + n, "bwd window")?,
                g: zeroed(k + n, "bwd g")?,
                pre: zeroed(n, "bwd pre")?,
                dx: zeroed(n, "bwd dx")?,
                dinit: Vec::new(),
                tmp: Vec::new(),
                zeros: Vec::new(),
                wt: Vec::new(),
                bias: Vec::new(),
                dw: Vec::new(),
                db: Vec::new(),
                bits: Vec::new(),
                dbits: Vec::new(),
                ids: Vec::new(),
                mask: Vec::new(),
                put_dx,
            }
        })
    };
    pool::run(jobs, cfg.threads, scratch, |s, job| dispatch_width!(w, job_bwd_pick(cfg.isa, &cv, p, cfg, s, job)))?;

    // dweight[d,k] = Σ_groups part[g][d][k] in group order (fixed), likewise dbias.
    let groups = cv.num_groups();
    let mut row = [0f32; 9];
    for d in 0..dim {
        row.fill(0.0);
        for g in 0..groups {
            let part = &parts[(g * dim + d) * (w + 1)..][..w + 1];
            for (r, v) in row.iter_mut().zip(part) {
                *r += *v;
            }
        }
        let dwv = &p.dweight;
        store(dwv, d as i64 * dwv.stride[0], dwv.stride[1], &row[..w]);
        if let Some(dbv) = &p.dbias {
            store(dbv, d as i64 * dbv.stride[0], dbv.stride[0], &row[w..w + 1]);
        }
    }
    Ok(())
}

isa_twins!(job_bwd_pick, job_bwd, (cv: &Conv<'_>, p: &BwdPlan, cfg: &Cfg, s: &mut Scratch, job: Job<'_>) -> Result<()>);

#[inline(always)]
fn job_bwd<const W: usize>(cv: &Conv, p: &BwdPlan, cfg: &Cfg, s: &mut Scratch, job: Job) -> Result<()> {
    let nc = job.c1 - job.c0;
    let ncp = row_stride(nc);
    if cv.cl {
        for c in 0..nc {
            for kk in 0..W {
                s.wt[kk * ncp + c] = cv.wf[(job.c0 + c) * W + kk];
            }
            s.bias[c] = cv.bf[job.c0 + c];
        }
        s.dw[..W * ncp].fill(0.0);
        s.db[..ncp].fill(0.0);
        s.zeros[..ncp].fill(0.0);
    }
    for u in &cv.units[job.u0..job.u1] {
        if u.slot < 0 {
            cv.zero_unit(&p.dx, u, job.c0, job.c1); // and it adds nothing to dweight/dbias
            continue;
        }
        let masked = cv.masked();
        if masked {
            cv.mask(u, &mut s.ids, &mut s.mask)?;
        }
        if cv.cl {
            match masked {
                true => cl_unit::<W, true>(cv, p, cfg.tile, s, u, job.c0, nc),
                false => cl_unit::<W, false>(cv, p, cfg.tile, s, u, job.c0, nc),
            }
        } else {
            for d in job.c0..job.c1 {
                let part = &mut job.part[(d - job.c0) * (W + 1)..][..W + 1];
                let next = d + 1 < job.c1;
                match masked {
                    true => cf_row::<W, true>(cv, p, cfg.chunk, s, u, d, next, part),
                    false => cf_row::<W, false>(cv, p, cfg.chunk, s, u, d, next, part),
                }
            }
        }
    }
    if cv.cl {
        for (c, part) in job.part.chunks_exact_mut(W + 1).enumerate() {
            for (kk, pk) in part[..W].iter_mut().enumerate() {
                *pk = s.dw[kk * ncp + c];
            }
            part[W] = s.db[c];
        }
    }
    Ok(())
}

/// Whether dfinal_states[j] reaches position L-K+j (the final-state condition of the forward).
#[inline]
fn dfinal_keeps(mask: Option<&[u8]>, k: usize, len: usize, j: usize) -> bool {
    match mask {
        Some(m) if len > 0 => (m[k + len - 1] >> (j + 1)) & 1 != 0,
        _ => true,
    }
}

/// Channel-first: channel `d` of unit `u`. Adds its dweight/dbias to `part` (`[W+1]`). While a
/// chunk is computed, the x and dout of the next one (this row's, else channel `d+1`'s when
/// `next`) are prefetched.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn cf_row<const W: usize, const M: bool>(
    cv: &Conv,
    p: &BwdPlan,
    chunk: usize,
    s: &mut Scratch,
    u: &Unit,
    d: usize,
    next: bool,
    part: &mut [f32],
) {
    let k = W - 1;
    let inp = cv.inp;
    let di = d as i64;
    let w: [f32; W] = from_fn(|kk| cv.wf[d * W + kk]);
    let bias = cv.bf[d];
    let mask: &[u8] = if M { &s.mask } else { &[] };
    let put_dx = s.put_dx;
    let (xe, g, pre, dxb) = (&mut s.xe, &mut s.g, &mut s.pre, &mut s.dx);
    let init = if u.has_init { inp.initial_states.as_ref() } else { None };
    match init {
        Some(v) => load(v, u.slot * v.stride[0] + di * v.stride[1], v.stride[2], &mut xe[..k]),
        None => xe[..k].fill(0.0),
    }
    g[..k].fill(0.0);
    let mut dinit = [0f32; 8];
    let mut dwl = [[0f32; 8]; W];
    let mut dbl = [0f32; 8];

    let x = &inp.x;
    let xb = u.row * x.stride[0] + di * x.stride[1] + u.t0 * x.stride[2];
    let dy = &p.dout;
    let yb = u.row * dy.stride[0] + di * dy.stride[1] + u.t0 * dy.stride[2];
    let dxv = &p.dx;
    let db = u.row * dxv.stride[0] + di * dxv.stride[1] + u.t0 * dxv.stride[2];
    // dx values for positions [p0, p0+len): p < 0 to dinitial, the rest to dx.
    let put = |p0: i64, v: &[f32], dinit: &mut [f32; 8]| {
        let neg = if p0 < 0 { ((-p0) as usize).min(v.len()) } else { 0 };
        for (i, &val) in v[..neg].iter().enumerate() {
            dinit[(p0 + k as i64) as usize + i] = val;
        }
        if neg < v.len() {
            let p1 = p0 + neg as i64;
            put_dx(dxv, db + p1 * dxv.stride[2], dxv.stride[2], &v[neg..]);
        }
    };

    // f32 x and dout with contiguous tokens are read in place (as in the forward): the x window
    // of tokens [t, t+n) is x[t-K..t+n], except for the unit's first 8 tokens, copied into xe
    // after the initial state (needs chunk ≥ 8 > K); g = dout·act'(pre) is written straight
    // from dout. The dweight lanes stay those of the chunk index (the split is at 8).
    let xs = F32Rows::new(x, xb, 0, x.stride[2], u.len, 1).filter(|_| chunk >= 8).map(|r| r.row(0));
    let ys = F32Rows::new(dy, yb, 0, dy.stride[2], u.len, 1).map(|r| r.row(0));
    let (xs, ys) = match (xs, ys) {
        (Some(a), Some(b)) => (Some(a), Some(b)),
        _ => (None, None),
    };
    let mut t = 0;
    while t < u.len {
        let n = (u.len - t).min(chunk);
        // Tokens [0, h) of the chunk have their x window in xe, [h, n) in x (xw1).
        let h = cf_chunk_window(xs, x, xb, t, n, k, xe);
        let xw1: &[f32] = match xs {
            Some(xs) if h < n => &xs[t + h - k..t + n],
            _ => &[],
        };
        let gc = &mut g[k..k + n];
        if ys.is_none() {
            load(dy, yb + t as i64 * dy.stride[2], dy.stride[2], gc);
        }
        let ahead = if t + n < u.len {
            Some((t + n, 0, (u.len - t - n).min(chunk)))
        } else {
            next.then_some((0, 1, u.len.min(chunk)))
        };
        if let Some((tn, dn, nn)) = ahead {
            prefetch(x, xb + dn * x.stride[1] + tn as i64 * x.stride[2], x.stride[2], nn);
            prefetch(dy, yb + dn * dy.stride[1] + tn as i64 * dy.stride[2], dy.stride[2], nn);
        }
        let m: &[u8] = if M { &mask[k + t..k + t + n] } else { &[] };
        let ms = |a: usize, b: usize| -> &[u8] { if M { &m[a..b] } else { &[] } };
        if inp.act != Act::None {
            let pre = &mut pre[..n];
            let conv = |o: &mut [f32], i0: usize, win: &[f32]| {
                if M {
                    cf_conv_masked::<W>(o, bias, &w, win, ms(i0, i0 + o.len()));
                } else {
                    cf_conv::<W>(o, bias, &w, win);
                }
            };
            conv(&mut pre[..h], 0, &xe[..k + h]);
            if h < n {
                conv(&mut pre[h..], h, xw1);
            }
            match ys {
                Some(ys) => mul_dact_to(inp.act, gc, &ys[t..t + n], pre),
                None => mul_dact(inp.act, gc, pre),
            }
        } else if let Some(ys) = ys {
            gc.copy_from_slice(&ys[t..t + n]);
        }
        if M {
            zero_invalid(gc, m);
        }
        for (kk, acc) in dwl.iter_mut().enumerate() {
            lanes_dot::<M>(acc, &gc[..h], &xe[kk..kk + h], ms(0, h), kk);
            if h < n {
                lanes_dot::<M>(acc, &gc[h..], &xw1[kk..kk + n - h], ms(h, n), kk);
            }
        }
        lanes_sum(&mut dbl, gc);
        let dxc = &mut dxb[..n];
        let mdx: &[u8] = if M { &mask[t..t + k + n] } else { &[] };
        cf_dx::<W, M>(dxc, &w, &g[..k + n], mdx);
        put(t as i64 - k as i64, dxc, &mut dinit);
        if xs.is_none() {
            xe.copy_within(n..n + k, 0);
        }
        g.copy_within(n..n + k, 0);
        t += n;
    }
    // Flush: dx for positions [len-K, len) (g of tokens ≥ len is 0), plus dfinal_states.
    if k > 0 {
        let len = u.len;
        g[k..2 * k].fill(0.0);
        let dxc = &mut dxb[..k];
        let mdx: &[u8] = if M { &mask[len..len + 2 * k] } else { &[] };
        cf_dx::<W, M>(dxc, &w, &g[..2 * k], mdx);
        if let Some(f) = &p.dfinal_states {
            let mut df = [0f32; 8];
            load(f, u.slot * f.stride[0] + di * f.stride[1], f.stride[2], &mut df[..k]);
            let mm = if M { Some(mask) } else { None };
            for j in 0..k {
                if dfinal_keeps(mm, k, len, j) {
                    dxc[j] += df[j];
                }
            }
        }
        put(len as i64 - k as i64, dxc, &mut dinit);
        if let Some(v) = &p.dinitial_states {
            let off = u.slot * v.stride[0] + di * v.stride[1];
            if u.has_init {
                store(v, off, v.stride[2], &dinit[..k]);
            } else {
                store_zeros(v, off, v.stride[2], k);
            }
        }
    }
    for (pk, lanes) in part.iter_mut().zip(&dwl) {
        *pk += lanes_total(lanes);
    }
    part[W] += lanes_total(&dbl);
}

/// Channel-last: channels `[c0, c0+nc)` of unit `u`, a tile of tokens at a time. `xe` holds K
/// halo rows then the tile's x rows; `g` the K previous g rows then the tile's; rows `ncp`
/// floats apart. Adds into the job's `s.dw` / `s.db`.
#[inline(always)]
fn cl_unit<const W: usize, const M: bool>(cv: &Conv, p: &BwdPlan, tile: usize, s: &mut Scratch, u: &Unit, c0: usize, nc: usize) {
    let k = W - 1;
    let inp = cv.inp;
    let c0i = c0 as i64;
    let ncp = row_stride(nc);
    let full = full_mask::<W>();
    let mask: &[u8] = if M { &s.mask } else { &[] };
    let put_dx = s.put_dx;
    let Scratch { xe, g, pre, dx, dinit, tmp, zeros, wt, bias, dw, db, bits, dbits, .. } = s;
    let row = |i: usize| i * ncp..i * ncp + nc;
    let init = if u.has_init { inp.initial_states.as_ref() } else { None };
    match init {
        Some(v) => {
            for j in 0..k {
                let off = u.slot * v.stride[0] + c0i * v.stride[1] + j as i64 * v.stride[2];
                load(v, off, v.stride[1], &mut xe[row(j)]);
            }
        }
        None => xe[..k * ncp].fill(0.0),
    }
    dinit[..k * ncp].fill(0.0);
    let tmp = &mut tmp[..nc];

    let x = &inp.x;
    let xb = u.row * x.stride[0] + c0i * x.stride[1] + u.t0 * x.stride[2];
    let dy = &p.dout;
    let yb = u.row * dy.stride[0] + c0i * dy.stride[1] + u.t0 * dy.stride[2];
    let dxv = &p.dx;
    let ob = u.row * dxv.stride[0] + c0i * dxv.stride[1] + u.t0 * dxv.stride[2];
    // dx row of position pos: p < 0 goes to dinitial row p + K.
    let put = |pos: i64, v: &[f32], dinit: &mut [f32]| {
        if pos < 0 {
            dinit[row((pos + k as i64) as usize)].copy_from_slice(v);
        } else {
            put_dx(dxv, ob + pos * dxv.stride[2], dxv.stride[1], v);
        }
    };
    // Which terms of dx at position pos count: term k uses token q = pos+K-k, mask m[K + q].
    let dx_bits = |pos: i64| -> u8 {
        if !M {
            return full;
        }
        let mut b = 0u8;
        for kk in 0..W {
            let mi = (2 * k as i64 + pos - kk as i64) as usize;
            b |= ((mask[mi] >> kk) & 1) << kk;
        }
        b
    };

    // f32 x and dout with contiguous rows of a multiple of 8 channels are read in place (x
    // window rows as in the forward, `cl_window`), other inputs copied a tile at a time (dout
    // into `pre`). `g[..K rows]` carries g of the K tokens before the tile (0 before token 0).
    let xr = F32Rows::new(x, xb, x.stride[2], x.stride[1], nc, u.len).filter(|_| nc % 8 == 0);
    let yr = F32Rows::new(dy, yb, dy.stride[2], dy.stride[1], nc, u.len);
    let (xr, yr) = match (xr, yr) {
        (Some(a), Some(b)) => (Some(a), Some(b)),
        _ => (None, None),
    };
    let nw = if xr.is_some() { nc } else { ncp };
    let len = u.len;
    let gc = &mut g[..k * ncp];
    gc.fill(0.0);

    // A tile of tokens [t, t+n): g for them, their dweight/dbias terms, and dx for positions
    // [t-K, t-K+n).
    let mut t = 0;
    while t < len {
        let n = (len - t).min(tile);
        for i in 0..n {
            let ti = (t + i) as i64;
            if xr.is_none() {
                load(x, xb + ti * x.stride[2], x.stride[1], &mut xe[row(k + i)]);
                load(dy, yb + ti * dy.stride[2], dy.stride[1], &mut pre[row(i)]);
            }
            bits[i] = if M { mask[k + t + i] } else { full };
            dbits[i] = dx_bits(ti - k as i64);
        }
        let dxt = &mut dx[..n * ncp];
        {
            let (xe, pre) = (&xe[..], &pre[..]);
            let xw = |r: usize| cl_window(xr, xe, t, r, k, ncp, nc);
            let yw = |i: usize| match yr {
                Some(yr) => yr.row(t + i),
                None => &pre[i * ncp..][..ncp],
            };
            cl_tile_bwd::<W>(dxt, gc, dw, db, (wt, bias), xw, yw, ncp, nw, &bits[..n], &dbits[..n], inp.act);
        }
        for i in 0..n {
            put((t + i) as i64 - k as i64, &dxt[row(i)], dinit);
            if xr.is_some() && t + n + i < len {
                let q = (t + n + i) as i64;
                prefetch(x, xb + q * x.stride[2], x.stride[1], nc);
                prefetch(dy, yb + q * dy.stride[2], dy.stride[1], nc);
            }
        }
        if xr.is_none() {
            xe.copy_within(n * ncp..(n + k) * ncp, 0);
        }
        t += n;
    }
    if k == 0 {
        return;
    }
    // Flush: dx for positions len-K+i from g of tokens len-K.. (the carried rows; 0 from len).
    let g0 = len as i64 - k as i64;
    for (i, b) in dbits[..k].iter_mut().enumerate() {
        *b = dx_bits(g0 + i as i64);
    }
    let dxt = &mut dx[..k * ncp];
    let gc = &gc[..];
    cl_tile::<W, true>(dxt, zeros, wt, |r| if r < k { &gc[r * ncp..][..ncp] } else { zeros }, ncp, nw, &dbits[..k], Act::None, false);
    let mm = if M { Some(mask) } else { None };
    for i in 0..k {
        let dxr = &mut dxt[row(i)];
        cl_add_dfinal(p, u, c0i, mm, k, i, dxr, tmp);
        put(g0 + i as i64, dxr, dinit);
    }
    cl_store_dinit(p, u, c0i, k, nc, |j| &dinit[row(j)]);
}

/// Channel-last flush row i (position len-K+i): adds dfinal_states row i of the unit's channels
/// to its dx where that state element came from this sequence.
#[inline(always)]
fn cl_add_dfinal(p: &BwdPlan, u: &Unit, c0i: i64, mask: Option<&[u8]>, k: usize, i: usize, dxr: &mut [f32], tmp: &mut [f32]) {
    if let Some(f) = &p.dfinal_states {
        if dfinal_keeps(mask, k, u.len, i) {
            let off = u.slot * f.stride[0] + c0i * f.stride[1] + i as i64 * f.stride[2];
            load(f, off, f.stride[1], tmp);
            add(dxr, tmp);
        }
    }
}

/// Channel-last: dinitial_states rows 0..K of the unit's channels from `rows(j)` (zeros when the
/// sequence read no initial state).
#[inline(always)]
fn cl_store_dinit<'a>(p: &BwdPlan, u: &Unit, c0i: i64, k: usize, nc: usize, rows: impl Fn(usize) -> &'a [f32]) {
    if let Some(v) = &p.dinitial_states {
        for j in 0..k {
            let off = u.slot * v.stride[0] + c0i * v.stride[1] + j as i64 * v.stride[2];
            if u.has_init {
                store(v, off, v.stride[1], rows(j));
            } else {
                store_zeros(v, off, v.stride[1], nc);
            }
        }
    }
}
