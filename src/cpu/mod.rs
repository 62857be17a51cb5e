//! CPU backend: forward, backward and decode update of the causal depthwise conv1d, following
//! docs/semantics.md. Multithreaded over (row group, channel block) jobs with `std::thread::scope`.
//!
//! Layout of this module:
//! * `elem`   — strided loads/stores of the caller's tensors (f32/f16/bf16 ↔ f32 scratch);
//! * `math`   — vectorisable exp / SiLU;
//! * `simd`   — run-time choice of the kernels' vector width (AVX2, AVX-512);
//! * `pool`   — thread count (`CCV1D_NUM_THREADS`), job runner, fallible scratch allocation;
//! * `conv`   — what forward and backward share: sequences ("units"), weights in f32,
//!   seq_idx masks, job split, and the width-monomorphised inner loops;
//! * `fwd`, `bwd`, `update` — the three ops.
//!
//! Two code paths per op, chosen from x's strides: channel-first (rows of tokens, a sliding
//! window over an f32 chunk; also the generic fallback for any strides) and channel-last
//! (token by token over a block of contiguous channels).

mod bwd;
mod conv;
mod elem;
mod fwd;
mod math;
mod pool;
mod simd;
mod update;

#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::plan::{BwdPlan, FwdPlan, UpdatePlan};

/// Tuning knobs; none of them changes results (tests shrink them to exercise chunk edges).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cfg {
    /// Threads for this call (the caller's included).
    pub threads: usize,
    /// Channel-first: tokens per chunk.
    pub chunk: usize,
    /// Channel-last: tokens per tile (rows of one column walk).
    pub tile: usize,
    /// Channel-last: most channels per block.
    pub block: usize,
    /// Which instantiation of the kernels runs (bitwise the same results; see `simd`).
    pub isa: simd::Isa,
}

impl Cfg {
    pub fn new(threads: usize) -> Cfg {
        Cfg { threads: threads.max(1), chunk: 2048, tile: 8, block: 2048, isa: simd::best() }
    }
}

/// Worker threads of the CPU backend (`CCV1D_NUM_THREADS`, else all cores); problems under
/// 65536 elements run on the calling thread alone.
pub fn num_threads() -> usize {
    pool::num_threads()
}

fn work(b: i64, d: i64, l: i64) -> usize {
    (b.max(0) as usize).saturating_mul(d.max(0) as usize).saturating_mul(l.max(0) as usize)
}

/// Forward: writes out and (when given) final_states.
pub fn fwd(p: &FwdPlan) -> Result<()> {
    let i = &p.inp;
    fwd::run(p, &Cfg::new(pool::threads_for(work(i.batch, i.dim, i.seqlen))))
}

/// Backward: overwrites dx, dweight, dbias, dinitial_states. dweight/dbias are bitwise the same
/// for any thread count.
pub fn bwd(p: &BwdPlan) -> Result<()> {
    let i = &p.inp;
    bwd::run(p, &Cfg::new(pool::threads_for(work(i.batch, i.dim, i.seqlen))))
}

/// Decode update: writes out, updates conv_state in place.
pub fn update(p: &UpdatePlan) -> Result<()> {
    update::run(p, &Cfg::new(pool::threads_for(work(p.batch, p.dim, p.seqlen.max(p.state_len)))))
}
