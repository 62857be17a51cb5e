//! Decode update: convolve S new tokens against a rolling conv_state, updating it in place
//! (Dao-AILab `causal_conv1d_update_ref`, with and without a circular `cache_seqlens` buffer).
//!
//! Each (row, channel) is independent: its x row is read completely into scratch before its out
//! row is written, so `out` may be exactly `x`. Rows that name their slot through
//! `conv_state_indices` may share one; then a job walks all rows in order for its channels, so
//! a repeated slot behaves as if the rows ran one after another.

use super::conv::{cf_conv, dispatch_width};
use super::elem::{idx1, load, store, store_zeros};
use super::math::apply_act;
use super::pool::{self, zeroed};
use super::simd::isa_twins;
use super::Cfg;
use crate::error::Result;
use crate::plan::UpdatePlan;

struct Scratch {
    /// `[state_len + S]`: the state row, then the new tokens.
    win: Vec<f32>,
    /// `[K + S]`: with cache_seqlens, the K previous tokens then the new ones.
    cat: Vec<f32>,
    /// `[S]` outputs.
    o: Vec<f32>,
}

struct Job {
    b0: usize,
    b1: usize,
    c0: usize,
    c1: usize,
}

pub fn run(p: &UpdatePlan, cfg: &Cfg) -> Result<()> {
    let w = p.width as usize;
    let k = w - 1;
    let (batch, dim) = (p.batch.max(0) as usize, p.dim.max(0) as usize);
    let (s_len, sl) = (p.seqlen.max(0) as usize, p.state_len.max(0) as usize);
    let mut wf = zeroed::<f32>(dim * w, "weights")?;
    for (d, row) in wf.chunks_exact_mut(w).enumerate() {
        load(&p.weight, d as i64 * p.weight.stride[0], p.weight.stride[1], row);
    }
    let mut bf = zeroed::<f32>(dim, "bias")?;
    if let Some(b) = &p.bias {
        load(b, 0, b.stride[0], &mut bf);
    }

    let rows_per_job = if p.conv_state_indices.is_some() { batch.max(1) } else { 1 };
    let row_jobs = batch.div_ceil(rows_per_job);
    let want = if cfg.threads <= 1 { 1 } else { (4 * cfg.threads).div_ceil(row_jobs.max(1)) };
    let block = dim.div_ceil(want).max(1);
    let mut jobs = Vec::new();
    for b0 in (0..batch).step_by(rows_per_job) {
        for c0 in (0..dim).step_by(block) {
            jobs.push(Job { b0, b1: (b0 + rows_per_job).min(batch), c0, c1: (c0 + block).min(dim) });
        }
    }
    let scratch = || -> Result<Scratch> {
        Ok(Scratch {
            win: zeroed(sl + s_len, "update window")?,
            cat: zeroed(k + s_len, "update window")?,
            o: zeroed(s_len, "update out")?,
        })
    };
    let (wf, bf) = (&wf, &bf);
    pool::run(jobs, cfg.threads, scratch, |s, job| dispatch_width!(w, job_update_pick(cfg.isa, p, wf, bf, s, &job)))
}

isa_twins!(job_update_pick, job_update, (p: &UpdatePlan, wf: &[f32], bf: &[f32], s: &mut Scratch, job: &Job) -> Result<()>);

#[inline(always)]
fn job_update<const W: usize>(p: &UpdatePlan, wf: &[f32], bf: &[f32], s: &mut Scratch, job: &Job) -> Result<()> {
    let k = W - 1;
    let (s_len, sl) = (p.seqlen as usize, p.state_len as usize);
    let (x, out, st) = (&p.x, &p.out, &p.conv_state);
    for b in job.b0..job.b1 {
        let bi = b as i64;
        let slot = match &p.conv_state_indices {
            Some(v) => idx1(v, bi) as i64,
            None => bi,
        };
        let cache = p.cache_seqlens.as_ref().map(|v| idx1(v, bi) as i64);
        for d in job.c0..job.c1 {
            let di = d as i64;
            let ooff = bi * out.stride[0] + di * out.stride[1];
            if slot < 0 {
                store_zeros(out, ooff, out.stride[2], s_len);
                continue;
            }
            let w: [f32; W] = std::array::from_fn(|kk| wf[d * W + kk]);
            let soff = slot * st.stride[0] + di * st.stride[1];
            let win = &mut s.win[..sl + s_len];
            load(st, soff, st.stride[2], &mut win[..sl]);
            load(x, bi * x.stride[0] + di * x.stride[1], x.stride[2], &mut win[sl..]);
            let o = &mut s.o[..s_len];
            match cache {
                None => {
                    // window = state ++ x; out[s] uses window[sl+s-K ..= sl+s]; state = window[S..].
                    cf_conv::<W>(o, bf[d], &w, &win[sl - k..]);
                    store(st, soff, st.stride[2], &win[s_len..]);
                }
                Some(c) => {
                    let cat = &mut s.cat[..k + s_len];
                    for j in 0..k {
                        // k > 0 implies state_len ≥ K > 0.
                        cat[j] = win[(c - k as i64 + j as i64).rem_euclid(sl as i64) as usize];
                    }
                    cat[k..].copy_from_slice(&win[sl..]);
                    cf_conv::<W>(o, bf[d], &w, cat);
                    if sl > 0 {
                        for (i, v) in win[sl..].iter().enumerate() {
                            let pos = (c + i as i64).rem_euclid(sl as i64);
                            store(st, soff + pos * st.stride[2], st.stride[2], std::slice::from_ref(v));
                        }
                    }
                }
            }
            apply_act(p.act, o);
            store(out, ooff, out.stride[2], o);
        }
    }
    Ok(())
}
