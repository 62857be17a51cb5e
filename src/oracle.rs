//! Independent f64 reference of docs/semantics.md: naive loops over plain owned arrays, written
//! from the contract alone (no code shared with `validate`, `cpu` or `gpu`). Used by the
//! integration tests and by `ccv1d test`.
//!
//! Every array is dense and logical, in row-major order of the dims the contract names:
//! x/out/dout/dx `[batch, dim, seqlen]`, weight/dweight `[dim, width]`, bias/dbias `[dim]`,
//! seq_idx `[batch, seqlen]`, state pools `[slots, dim, width-1]`, conv_state
//! `[slots, dim, state_len]`. The library receives inputs in their storage dtype, so feed the
//! oracle the values *as stored* (see [`round_to`]); it then computes exactly in f64.

use crate::plan::DType;

// ---------------------------------------------------------------------------------------------
// Problems and results
// ---------------------------------------------------------------------------------------------

/// Inputs of a forward / backward call.
#[derive(Clone, Debug, Default)]
pub struct ConvProblem {
    pub batch: usize,
    pub dim: usize,
    pub seqlen: usize,
    /// 1..=8.
    pub width: usize,
    pub silu: bool,
    /// `[batch, dim, seqlen]`.
    pub x: Vec<f64>,
    /// `[dim, width]`.
    pub weight: Vec<f64>,
    /// `[dim]`.
    pub bias: Option<Vec<f64>>,
    /// `[batch, seqlen]`; not together with `cu_seqlens`.
    pub seq_idx: Option<Vec<i32>>,
    /// `[slots, dim, width-1]`.
    pub initial_states: Option<Vec<f64>>,
    /// `[num_seqs+1]`; packed sequences over a batch of 1.
    pub cu_seqlens: Option<Vec<i32>>,
    /// `[num_seqs]`: slot of each sequence, `< 0` = skip.
    pub state_indices: Option<Vec<i32>>,
    /// `[num_seqs]`.
    pub has_initial_state: Option<Vec<bool>>,
    /// Slots in the state pools; 0 = as many as sequences (as in the C API).
    pub num_slots: usize,
}

/// One sequence of a problem: a token range of one batch row and its state slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpan {
    pub row: usize,
    pub start: usize,
    pub len: usize,
    /// `None`: skipped (outputs 0, no state read or written).
    pub slot: Option<usize>,
    /// Reads its initial state (false: zeros).
    pub has_init: bool,
}

impl ConvProblem {
    pub fn k(&self) -> usize {
        self.width - 1
    }
    /// Sequences: the batch rows, or the packed sequences of `cu_seqlens`.
    pub fn num_seqs(&self) -> usize {
        match &self.cu_seqlens {
            Some(cu) => cu.len() - 1,
            None => self.batch,
        }
    }
    pub fn slots(&self) -> usize {
        if self.num_slots == 0 {
            self.num_seqs()
        } else {
            self.num_slots
        }
    }
    pub fn state_len(&self) -> usize {
        self.slots() * self.dim * self.k()
    }

    /// The sequences with their token ranges and slots (panics on an inconsistent problem).
    pub fn seqs(&self) -> Vec<SeqSpan> {
        let n = self.num_seqs();
        let slots = self.slots();
        (0..n)
            .map(|i| {
                let (row, start, len) = match &self.cu_seqlens {
                    Some(cu) => {
                        assert_eq!(self.batch, 1, "oracle: cu_seqlens needs batch 1");
                        assert!(self.seq_idx.is_none(), "oracle: seq_idx with cu_seqlens");
                        let (a, b) = (cu[i], cu[i + 1]);
                        assert!(a >= 0 && b >= a && b as usize <= self.seqlen, "oracle: bad cu_seqlens {cu:?}");
                        (0, a as usize, (b - a) as usize)
                    }
                    None => (i, 0, self.seqlen),
                };
                let slot = match &self.state_indices {
                    Some(si) if si[i] < 0 => None,
                    Some(si) => Some(si[i] as usize),
                    None => Some(i),
                };
                if let Some(s) = slot {
                    assert!(s < slots, "oracle: slot {s} of sequence {i} out of range ({slots} slots)");
                }
                let has_init = self.has_initial_state.as_ref().map_or(true, |h| h[i]);
                SeqSpan { row, start, len, slot, has_init }
            })
            .collect()
    }

    fn check_sizes(&self) {
        let (b, d, l, w) = (self.batch, self.dim, self.seqlen, self.width);
        assert!((1..=8).contains(&w), "oracle: width {w}");
        assert_eq!(self.x.len(), b * d * l, "oracle: x size");
        assert_eq!(self.weight.len(), d * w, "oracle: weight size");
        if let Some(v) = &self.bias {
            assert_eq!(v.len(), d, "oracle: bias size");
        }
        if let Some(v) = &self.seq_idx {
            assert_eq!(v.len(), b * l, "oracle: seq_idx size");
        }
        if let Some(v) = &self.initial_states {
            assert_eq!(v.len(), self.state_len(), "oracle: initial_states size");
        }
        if let Some(v) = &self.state_indices {
            assert_eq!(v.len(), self.num_seqs(), "oracle: state_indices size");
        }
        if let Some(v) = &self.has_initial_state {
            assert_eq!(v.len(), self.num_seqs(), "oracle: has_initial_state size");
        }
    }
}

/// Forward result.
#[derive(Clone, Debug)]
pub struct FwdResult {
    /// `[batch, dim, seqlen]`.
    pub out: Vec<f64>,
    /// Per element of `out`: the magnitude its rounding errors scale with (see [`Tol::bound`]);
    /// 0 exactly where `out` is a structural 0.
    pub out_mag: Vec<f64>,
    /// `[slots, dim, width-1]`; rows of slots not written are 0 here (see `final_written`).
    pub final_states: Vec<f64>,
    /// Per slot: does the call write `final_states[slot]`? Other slots must stay untouched.
    pub final_written: Vec<bool>,
}

impl FwdResult {
    /// The whole pool after the call, given its content before (for an aliased pool, the
    /// initial states; otherwise whatever the caller had there).
    pub fn final_pool_over(&self, before: &[f64], dim: usize, k: usize) -> Vec<f64> {
        merge_slots(&self.final_states, before, &self.final_written, dim * k)
    }
}

/// Backward result.
#[derive(Clone, Debug)]
pub struct BwdResult {
    /// `[batch, dim, seqlen]`.
    pub dx: Vec<f64>,
    /// `[dim, width]`.
    pub dweight: Vec<f64>,
    /// `[dim]`.
    pub dbias: Vec<f64>,
    /// `[slots, dim, width-1]`; meaningful where `dinit_written` (needs initial_states).
    pub dinitial_states: Vec<f64>,
    pub dinit_written: Vec<bool>,
    /// Error magnitudes of each output, element by element (see [`Tol::bound`]).
    pub dx_mag: Vec<f64>,
    pub dweight_mag: Vec<f64>,
    pub dbias_mag: Vec<f64>,
    pub dinit_mag: Vec<f64>,
}

impl BwdResult {
    pub fn dinit_pool_over(&self, before: &[f64], dim: usize, k: usize) -> Vec<f64> {
        merge_slots(&self.dinitial_states, before, &self.dinit_written, dim * k)
    }
}

fn merge_slots(new: &[f64], before: &[f64], written: &[bool], per_slot: usize) -> Vec<f64> {
    assert_eq!(new.len(), before.len());
    let mut v = before.to_vec();
    for (s, &w) in written.iter().enumerate() {
        if w {
            v[s * per_slot..(s + 1) * per_slot].copy_from_slice(&new[s * per_slot..(s + 1) * per_slot]);
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Activation
// ---------------------------------------------------------------------------------------------

pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// z·σ(z), with its limit -0 at z = -inf (docs/semantics.md; the product would be -inf·0).
pub fn silu(z: f64) -> f64 {
    if z == f64::NEG_INFINITY {
        return -0.0;
    }
    z * sigmoid(z)
}

/// d/dz silu(z) = σ(z)(1 + z(1-σ(z))), with its limits at ±inf: -0 and 1.
pub fn silu_grad(z: f64) -> f64 {
    if z.is_infinite() {
        return if z > 0.0 { 1.0 } else { -0.0 };
    }
    let s = sigmoid(z);
    s * (1.0 + z * (1.0 - s))
}

fn act(silu_on: bool, z: f64) -> f64 {
    if silu_on {
        silu(z)
    } else {
        z
    }
}

/// Error magnitude of `act(pre)` when pre's terms sum to `mag` in absolute value: SiLU's
/// slope is at most 1.1, and its own evaluation adds a few ulps of the result.
fn act_mag(silu_on: bool, pre: f64, mag: f64) -> f64 {
    if silu_on {
        1.1 * mag + silu(pre).abs()
    } else {
        mag
    }
}

fn act_grad(silu_on: bool, z: f64) -> f64 {
    if silu_on {
        silu_grad(z)
    } else {
        1.0
    }
}

// ---------------------------------------------------------------------------------------------
// One (sequence, channel) row: extended input, ids, pre-activation
// ---------------------------------------------------------------------------------------------

/// The contract's per-row quantities for one sequence and one channel, with local time
/// `t ∈ [-K, len)`.
struct Row<'a> {
    p: &'a ConvProblem,
    s: SeqSpan,
    d: usize,
    k: usize,
}

impl<'a> Row<'a> {
    fn x_index(&self, t: usize) -> usize {
        (self.s.row * self.p.dim + self.d) * self.p.seqlen + self.s.start + t
    }
    fn state_index(&self, j: usize) -> usize {
        (self.s.slot.unwrap() * self.p.dim + self.d) * self.k + j
    }
    /// Whether the sequence reads its initial state.
    fn reads_init(&self) -> bool {
        self.p.initial_states.is_some() && self.s.has_init && self.s.slot.is_some()
    }
    /// `xe(t)`.
    fn xe(&self, t: isize) -> f64 {
        if t >= 0 {
            self.p.x[self.x_index(t as usize)]
        } else if self.reads_init() {
            let j = (t + self.k as isize) as usize;
            self.p.initial_states.as_ref().unwrap()[self.state_index(j)]
        } else {
            0.0
        }
    }
    /// `id(t)`; `t < 0` takes the first token's id. An empty sequence has no ids: every
    /// position counts as one sequence (the contract's L = 0 rule: final = initial).
    fn id(&self, t: isize) -> i32 {
        match &self.p.seq_idx {
            None => 0,
            Some(_) if self.s.len == 0 => 0,
            Some(ids) => {
                let tt = if t < 0 { 0 } else { t as usize };
                ids[self.s.row * self.p.seqlen + self.s.start + tt]
            }
        }
    }
    fn w(&self, k: usize) -> f64 {
        self.p.weight[self.d * self.p.width + k]
    }
    /// `pre(t)` for `0 ≤ t < len`, and the sum of the absolute values of its terms.
    fn pre(&self, t: usize) -> (f64, f64) {
        let it = self.id(t as isize);
        let b = self.p.bias.as_ref().map_or(0.0, |b| b[self.d]);
        let (mut acc, mut mag) = (b, b.abs());
        for kk in 0..self.p.width {
            let src = t as isize - self.k as isize + kk as isize;
            if self.id(src) == it {
                let term = self.w(kk) * self.xe(src);
                acc += term;
                mag += term.abs();
            }
        }
        (acc, mag)
    }
    /// Does position `p ∈ [len-K, len)` feed the final state? (the contract's final-state rule)
    fn feeds_final(&self, p: isize) -> bool {
        if self.p.seq_idx.is_none() || self.s.len == 0 {
            return true;
        }
        let last = self.id(self.s.len as isize - 1);
        last >= 0 && self.id(p) == last
    }
    /// `g(t) = id(t) < 0 ? 0 : dout · act'(pre(t))`, and its error magnitude: an fp32 error
    /// `δ` of pre moves `act'` by at most `|act''|·δ ≤ 0.5·δ` (SiLU), so
    /// `|dout|·(|act'(pre)| + 0.5·mag(pre))`. An infinite pre (an infinite x in the window) is
    /// exact, and SiLU' saturates there (0 or 1): no δ term, so the magnitude stays finite and
    /// the sums it enters keep their own tolerance.
    fn g(&self, t: usize, dout: &[f64]) -> (f64, f64) {
        if self.id(t as isize) < 0 {
            (0.0, 0.0)
        } else {
            let (pre, mag) = self.pre(t);
            let dy = dout[self.x_index(t)];
            let ag = act_grad(self.p.silu, pre);
            let delta = if pre.is_infinite() { 0.0 } else { 0.5 * mag };
            let gmag = if self.p.silu { dy.abs() * (ag.abs() + delta) } else { dy.abs() };
            (dy * ag, gmag)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward / backward
// ---------------------------------------------------------------------------------------------

/// Forward per docs/semantics.md ("Forward", "Forward with cu_seqlens").
pub fn forward(p: &ConvProblem) -> FwdResult {
    p.check_sizes();
    let (d_n, l_n, k) = (p.dim, p.seqlen, p.k());
    let slots = p.slots();
    let mut out = vec![0.0; p.batch * d_n * l_n];
    let mut out_mag = vec![0.0; p.batch * d_n * l_n];
    let mut final_states = vec![0.0; slots * d_n * k];
    let mut final_written = vec![false; slots];
    for s in p.seqs() {
        let Some(slot) = s.slot else { continue };
        for d in 0..d_n {
            let r = Row { p, s, d, k };
            for t in 0..s.len {
                if r.id(t as isize) >= 0 {
                    let (pre, mag) = r.pre(t);
                    out[r.x_index(t)] = act(p.silu, pre);
                    out_mag[r.x_index(t)] = act_mag(p.silu, pre, mag);
                }
            }
            for j in 0..k {
                let pos = s.len as isize - k as isize + j as isize;
                final_states[r.state_index(j)] = if r.feeds_final(pos) { r.xe(pos) } else { 0.0 };
            }
        }
        final_written[slot] = true;
    }
    FwdResult { out, out_mag, final_states, final_written }
}

/// Backward per docs/semantics.md ("Backward"). `dout` is `[batch, dim, seqlen]`,
/// `dfinal_states` `[slots, dim, width-1]`.
pub fn backward(p: &ConvProblem, dout: &[f64], dfinal_states: Option<&[f64]>) -> BwdResult {
    p.check_sizes();
    let (d_n, l_n, w_n, k) = (p.dim, p.seqlen, p.width, p.k());
    let slots = p.slots();
    assert_eq!(dout.len(), p.batch * d_n * l_n, "oracle: dout size");
    if let Some(v) = dfinal_states {
        assert_eq!(v.len(), slots * d_n * k, "oracle: dfinal_states size");
    }
    let mut dx = vec![0.0; p.batch * d_n * l_n];
    let mut dweight = vec![0.0; d_n * w_n];
    let mut dbias = vec![0.0; d_n];
    let mut dinit = vec![0.0; slots * d_n * k];
    let mut dinit_written = vec![false; slots];
    let mut dx_mag = vec![0.0; dx.len()];
    let mut dweight_mag = vec![0.0; dweight.len()];
    let mut dbias_mag = vec![0.0; dbias.len()];
    let mut dinit_mag = vec![0.0; dinit.len()];
    for s in p.seqs() {
        let Some(slot) = s.slot else { continue };
        for d in 0..d_n {
            let r = Row { p, s, d, k };
            let (g, gmag): (Vec<f64>, Vec<f64>) = (0..s.len).map(|t| r.g(t, dout)).unzip();
            // dx / dinitial_states: every position p ∈ [-K, len).
            for pos in -(k as isize)..s.len as isize {
                let ip = r.id(pos);
                let (mut acc, mut mag) = (0.0, 0.0);
                for kk in 0..w_n {
                    let q = pos + k as isize - kk as isize;
                    if q >= 0 && (q as usize) < s.len && r.id(q) == ip {
                        acc += r.w(kk) * g[q as usize];
                        mag += r.w(kk).abs() * gmag[q as usize];
                    }
                }
                let first_final = s.len as isize - k as isize;
                if let Some(df) = dfinal_states {
                    if pos >= first_final && r.feeds_final(pos) {
                        let v = df[r.state_index((pos - first_final) as usize)];
                        acc += v;
                        mag += v.abs();
                    }
                }
                if pos >= 0 {
                    dx[r.x_index(pos as usize)] = acc;
                    dx_mag[r.x_index(pos as usize)] = mag;
                } else if p.initial_states.is_some() && s.has_init {
                    let j = (pos + k as isize) as usize;
                    dinit[r.state_index(j)] = acc;
                    dinit_mag[r.state_index(j)] = mag;
                }
            }
            // dweight / dbias.
            for t in 0..s.len {
                let it = r.id(t as isize);
                for kk in 0..w_n {
                    let src = t as isize - k as isize + kk as isize;
                    // Padding tokens (id < 0) add nothing: not even 0·x (x there may be NaN).
                    if it >= 0 && r.id(src) == it {
                        let xe = r.xe(src);
                        dweight[d * w_n + kk] += g[t] * xe;
                        dweight_mag[d * w_n + kk] += gmag[t] * xe.abs();
                    }
                }
                dbias[d] += g[t];
                dbias_mag[d] += gmag[t];
            }
        }
        if p.initial_states.is_some() {
            dinit_written[slot] = true;
        }
    }
    BwdResult { dx, dweight, dbias, dinitial_states: dinit, dinit_written, dx_mag, dweight_mag, dbias_mag, dinit_mag }
}

// ---------------------------------------------------------------------------------------------
// Update (decode)
// ---------------------------------------------------------------------------------------------

/// Inputs of a decode update.
#[derive(Clone, Debug, Default)]
pub struct UpdateProblem {
    pub batch: usize,
    pub dim: usize,
    /// New tokens per row, S ≥ 1.
    pub seqlen: usize,
    pub width: usize,
    /// ≥ width-1.
    pub state_len: usize,
    pub silu: bool,
    /// `[batch, dim, seqlen]`.
    pub x: Vec<f64>,
    /// `[dim, width]`.
    pub weight: Vec<f64>,
    pub bias: Option<Vec<f64>>,
    /// `[slots, dim, state_len]`, before the call.
    pub conv_state: Vec<f64>,
    /// `[batch]`.
    pub cache_seqlens: Option<Vec<i32>>,
    /// `[batch]`, `< 0` = padding row.
    pub conv_state_indices: Option<Vec<i32>>,
    /// 0 = batch.
    pub num_slots: usize,
}

impl UpdateProblem {
    pub fn slots(&self) -> usize {
        if self.num_slots == 0 {
            self.batch
        } else {
            self.num_slots
        }
    }
}

#[derive(Clone, Debug)]
pub struct UpdateResult {
    /// `[batch, dim, seqlen]`.
    pub out: Vec<f64>,
    /// Error magnitude of each element of `out` (see [`Tol::bound`]).
    pub out_mag: Vec<f64>,
    /// `[slots, dim, state_len]` after the call (slots not written keep their content).
    pub conv_state: Vec<f64>,
    /// Per slot: written by the call.
    pub written: Vec<bool>,
}

/// Decode update per docs/semantics.md ("Update"), equal to Dao-AILab `causal_conv1d_update_ref`.
pub fn update(p: &UpdateProblem) -> UpdateResult {
    let (b_n, d_n, s_n, w_n, sl) = (p.batch, p.dim, p.seqlen, p.width, p.state_len);
    let k = w_n - 1;
    let slots = p.slots();
    assert!((1..=8).contains(&w_n) && s_n >= 1 && sl >= k, "oracle: bad update dims");
    assert_eq!(p.x.len(), b_n * d_n * s_n, "oracle: x size");
    assert_eq!(p.weight.len(), d_n * w_n, "oracle: weight size");
    assert_eq!(p.conv_state.len(), slots * d_n * sl, "oracle: conv_state size");
    let mut out = vec![0.0; b_n * d_n * s_n];
    let mut out_mag = vec![0.0; b_n * d_n * s_n];
    let mut state = p.conv_state.clone();
    let mut written = vec![false; slots];
    for b in 0..b_n {
        let slot = match &p.conv_state_indices {
            Some(ci) if ci[b] < 0 => continue,
            Some(ci) => ci[b] as usize,
            None => b,
        };
        assert!(slot < slots, "oracle: slot {slot} out of range");
        assert!(!written[slot], "oracle: two rows share slot {slot} (order-dependent)");
        written[slot] = true;
        for d in 0..d_n {
            let st = &mut state[(slot * d_n + d) * sl..(slot * d_n + d + 1) * sl];
            let xr = &p.x[(b * d_n + d) * s_n..(b * d_n + d + 1) * s_n];
            let bias = p.bias.as_ref().map_or(0.0, |v| v[d]);
            let w = &p.weight[d * w_n..(d + 1) * w_n];
            let o = &mut out[(b * d_n + d) * s_n..(b * d_n + d + 1) * s_n];
            let om = &mut out_mag[(b * d_n + d) * s_n..(b * d_n + d + 1) * s_n];
            match &p.cache_seqlens {
                None => {
                    let win: Vec<f64> = st.iter().chain(xr.iter()).copied().collect();
                    for s in 0..s_n {
                        let (mut acc, mut mag) = (bias, bias.abs());
                        for kk in 0..w_n {
                            acc += w[kk] * win[sl + s - k + kk];
                            mag += (w[kk] * win[sl + s - k + kk]).abs();
                        }
                        o[s] = act(p.silu, acc);
                        om[s] = act_mag(p.silu, acc, mag);
                    }
                    st.copy_from_slice(&win[s_n..]);
                }
                Some(cs) => {
                    let c = cs[b] as i64;
                    let prev: Vec<f64> =
                        (0..k).map(|j| st[(c - k as i64 + j as i64).rem_euclid(sl as i64) as usize]).collect();
                    let cat: Vec<f64> = prev.iter().chain(xr.iter()).copied().collect();
                    for s in 0..s_n {
                        let (mut acc, mut mag) = (bias, bias.abs());
                        for kk in 0..w_n {
                            acc += w[kk] * cat[s + kk];
                            mag += (w[kk] * cat[s + kk]).abs();
                        }
                        o[s] = act(p.silu, acc);
                        om[s] = act_mag(p.silu, acc, mag);
                    }
                    for s in 0..s_n {
                        st[(c + s as i64).rem_euclid(sl as i64) as usize] = xr[s];
                    }
                }
            }
        }
    }
    UpdateResult { out, out_mag, conv_state: state, written }
}

// ---------------------------------------------------------------------------------------------
// Rounding to storage dtypes
// ---------------------------------------------------------------------------------------------

/// `v` rounded (to nearest, ties to even) to `dt` and back to f64: the value the library
/// actually receives when the caller stores `v` in a `dt` tensor.
pub fn round_to(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
    }
}

pub fn round_all(dt: DType, v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| round_to(dt, x)).collect()
}

// ---------------------------------------------------------------------------------------------
// Comparison and tolerances
// ---------------------------------------------------------------------------------------------

/// Unit roundoff (half an ulp at 1.0) of a storage dtype.
pub fn unit_roundoff(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2f64.powi(-24),
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
    }
}

/// Half an ulp of `dt` at `v`: the largest error of a correct round-to-nearest of `v` into `dt`
/// (subnormals included; 0 for values beyond the dtype's range, which must not occur).
pub fn half_ulp(dt: DType, v: f64) -> f64 {
    let (mant_bits, min_exp) = match dt {
        DType::F32 => (23, -126),
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
    };
    // Binary exponent of |v| from its bits (v is a normal f64 or 0 here).
    let biased = ((v.to_bits() >> 52) & 0x7ff) as i32;
    let e = if biased == 0 { min_exp } else { (biased - 1023).max(min_exp) };
    f64::from_bits(((e - mant_bits - 1 + 1023) as u64) << 52)
}

/// Norm tolerance (‖got−want‖/‖want‖) of an output stored in `dt`, the per-dtype figure of
/// merit. The library's only rounding steps are fp32 arithmetic and one final rounding to
/// `dt`, so the norm error is about half an ulp of `dt` (RMS well below it):
/// - f32: fp32 sums of ≤ 9 terms ≈ 1e-6 of the terms → 1e-5;
/// - f16: the final rounding is ≤ 4.9e-4 relative → 2e-3 (4×);
/// - bf16: ≤ 3.9e-3 relative → 1.5e-2 (4×).
/// Sums that cancel can exceed it relative to the result but not relative to their terms:
/// [`check`] adds the fp32 allowance of [`Tol::bound`] to the norm as well.
pub fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 1.5e-2,
    }
}

/// fp32 arithmetic allowance of an elementwise output, relative to the magnitude of its terms
/// (`mag` = Σ|terms|, propagated through SiLU): a sum of ≤ 9 products errs by at most 9·u of
/// `mag`; SiLU, `exp` (also fast-math `__expf`, a few ulps) and the `dout·act'` product add a
/// few more. 128·u ≈ 7.6e-6 leaves room for any fp32 evaluation order and for fast `exp`.
pub fn elementwise_acc() -> f64 {
    128.0 * unit_roundoff(DType::F32)
}

/// fp32 allowance of a reduction over `n_terms` tokens (dweight, dbias), relative to `mag`.
/// The sum runs in fp32 in an order the oracle does not know. With random-sign terms the
/// rounding errors of a sequential sum grow like a random walk over partial sums of size
/// `~√i·σ`, i.e. `~u·σ·n/√2`, while `mag ≈ 0.8·n·σ`: about `u` of `mag` whatever `n`; with
/// terms of one sign the partial sums grow like `i`, giving `~u·√(n/3)` of `mag`. We allow
/// [`elementwise_acc`] + `4·u·√n` (n = 16384 → 3.8e-5 of `mag`; blocked or pairwise sums do far
/// better).
pub fn reduction_acc(n_terms: usize) -> f64 {
    elementwise_acc() + 4.0 * unit_roundoff(DType::F32) * (n_terms.max(1) as f64).sqrt()
}

/// What [`check`] allows.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    /// Storage dtype of the output (its final rounding).
    pub dt: DType,
    /// Norm tolerance: ‖got−want‖₂ ≤ rel·‖want‖₂ + acc·‖mag‖₂.
    pub rel: f64,
    /// fp32 arithmetic error allowed, relative to each element's `mag`.
    pub acc: f64,
}

impl Tol {
    /// Elementwise outputs (out, dx, dinitial_states, update out).
    pub fn elementwise(dt: DType) -> Tol {
        Tol { dt, rel: tolerance(dt), acc: elementwise_acc() }
    }
    /// Reductions over `n_terms` tokens (dweight, dbias).
    pub fn reduction(dt: DType, n_terms: usize) -> Tol {
        Tol { dt, rel: tolerance(dt), acc: reduction_acc(n_terms) }
    }
    /// The most one element may be off: one correct rounding into `dt` (half an ulp, nearest
    /// even) plus the fp32 arithmetic error `acc·mag`. A truncating conversion exceeds it.
    pub fn bound(&self, want: f64, mag: f64) -> f64 {
        1.001 * half_ulp(self.dt, want) + self.acc * mag
    }
}

/// Errors of `got` against `want`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrStats {
    pub n: usize,
    /// max |got - want|.
    pub max_abs: f64,
    /// ‖got - want‖₂ / ‖want‖₂ (0 when both are all zero, ∞ when only want is).
    pub rel: f64,
    /// Worst elementwise |got-want| / [`Tol::bound`]; ≤ 1 passes.
    pub max_elem: f64,
    /// Index of the worst element (by `max_elem`).
    pub worst: usize,
}

/// Error statistics of `got` against `want` (`mag`: per-element error magnitudes).
pub fn err_stats(got: &[f64], want: &[f64], mag: &[f64], tol: &Tol) -> ErrStats {
    assert!(got.len() == want.len() && mag.len() == want.len(), "err_stats: lengths differ");
    let n = got.len();
    let (mut num, mut den) = (0.0, 0.0);
    let mut max_abs: f64 = 0.0;
    let mut max_elem: f64 = 0.0;
    let mut worst = 0;
    for i in 0..n {
        let e = got[i] - want[i];
        num += e * e;
        den += want[i] * want[i];
        if e.is_nan() || e.abs() > max_abs {
            max_abs = e.abs();
        }
        let r = e.abs() / tol.bound(want[i], mag[i]);
        if r.is_nan() || r > max_elem {
            max_elem = r;
            worst = i;
        }
    }
    let rel = if den == 0.0 {
        if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (num / den).sqrt()
    };
    ErrStats { n, max_abs, rel, max_elem, worst }
}

/// Compare a library output with the oracle (`mag` from the oracle's result):
/// - every element finite (a NaN means an element was not written over the poison);
/// - where the oracle has no terms at all (`mag == 0`: skipped sequences, padding ids,
///   initial-state gradients without an initial state, empty sums) the library must write
///   exactly 0;
/// - every element within [`Tol::bound`] (one correct rounding plus fp32 arithmetic, relative
///   to the element's own terms: one wrong element among many cannot hide in a norm, a
///   truncating conversion fails, and a sum that cancels is judged against its terms);
/// - ‖got−want‖₂ ≤ `rel`·‖want‖₂ + `acc`·‖mag‖₂.
pub fn check(name: &str, got: &[f64], want: &[f64], mag: &[f64], tol: &Tol) -> Result<ErrStats, String> {
    if got.len() != want.len() || mag.len() != want.len() {
        return Err(format!("{name}: {} elements, oracle has {}", got.len(), want.len()));
    }
    if let Some(i) = got.iter().position(|g| !g.is_finite()) {
        let bad = got.iter().filter(|g| !g.is_finite()).count();
        return Err(format!(
            "{name}: {bad}/{} elements not finite (first at {i}: got {}, want {}): unwritten or overflow",
            got.len(),
            got[i],
            want[i]
        ));
    }
    if let Some(i) = (0..got.len()).find(|&i| mag[i] == 0.0 && got[i] != 0.0) {
        return Err(format!("{name}: element {i} has no terms and must be exactly 0 (got {:e})", got[i]));
    }
    let e = err_stats(got, want, mag, tol);
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    let err_norm = norm(&mut got.iter().zip(want).map(|(g, w)| g - w));
    let allowed = tol.rel * norm(&mut want.iter().copied()) + tol.acc * norm(&mut mag.iter().copied());
    if !(e.max_elem <= 1.0) || !(err_norm <= allowed) {
        return Err(format!(
            "{name} ({}): rel {:.3e} (norm tolerance {:.1e}), max_abs {:.3e}, worst element {}: got {:e} want {:e} = {:.2}× its bound {:.2e} (mag {:.2e})",
            tol.dt.name(),
            e.rel,
            tol.rel,
            e.max_abs,
            e.worst,
            got[e.worst],
            want[e.worst],
            e.max_elem,
            tol.bound(want[e.worst], mag[e.worst]),
            mag[e.worst]
        ));
    }
    Ok(e)
}

// ---------------------------------------------------------------------------------------------
// Tests of the oracle itself (hand-computed cases; each can fail)
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn base(width: usize, x: &[f64], w: &[f64]) -> ConvProblem {
        ConvProblem {
            batch: 1,
            dim: 1,
            seqlen: x.len(),
            width,
            x: x.to_vec(),
            weight: w.to_vec(),
            ..Default::default()
        }
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn fwd_width2_by_hand() {
        // out[t] = 1 + 2·x[t-1] + 3·x[t]
        let mut p = base(2, &[1.0, 2.0, 3.0], &[2.0, 3.0]);
        p.bias = Some(vec![1.0]);
        let r = forward(&p);
        close(&r.out, &[4.0, 9.0, 14.0]);
        close(&r.final_states, &[3.0]);
        assert_eq!(r.final_written, vec![true]);
        // With an initial state 5: out[0] = 1 + 2·5 + 3·1.
        p.initial_states = Some(vec![5.0]);
        let r = forward(&p);
        close(&r.out, &[14.0, 9.0, 14.0]);
    }

    #[test]
    fn fwd_width3_short_sequence_final_state_reaches_into_initial() {
        // W=3, K=2, L=1: final = [init[1], x[0]].
        let mut p = base(3, &[7.0], &[1.0, 10.0, 100.0]);
        p.initial_states = Some(vec![2.0, 3.0]);
        let r = forward(&p);
        close(&r.out, &[2.0 + 30.0 + 700.0]);
        close(&r.final_states, &[3.0, 7.0]);
        // No initial states: zeros before the start.
        p.initial_states = None;
        let r = forward(&p);
        close(&r.out, &[700.0]);
        close(&r.final_states, &[0.0, 7.0]);
    }

    #[test]
    fn fwd_seqlen0_final_is_initial() {
        let mut p = base(3, &[], &[1.0, 1.0, 1.0]);
        p.initial_states = Some(vec![4.0, 5.0]);
        p.seq_idx = Some(vec![]);
        let r = forward(&p);
        assert!(r.out.is_empty());
        close(&r.final_states, &[4.0, 5.0]);
    }

    #[test]
    fn bwd_seqlen0_dinit_is_dfinal() {
        let mut p = base(3, &[], &[1.0, 1.0, 1.0]);
        p.initial_states = Some(vec![4.0, 5.0]);
        p.seq_idx = Some(vec![]);
        let r = backward(&p, &[], Some(&[7.0, 8.0]));
        close(&r.dinitial_states, &[7.0, 8.0]);
        close(&r.dweight, &[0.0, 0.0, 0.0]);
    }

    #[test]
    fn fwd_silu_values() {
        // W=1, w=1, bias 0: out = silu(x).
        let p = ConvProblem { silu: true, ..base(1, &[0.0, 1.0, -1.0, 2.0], &[1.0]) };
        let r = forward(&p);
        close(&r.out, &[0.0, 0.7310585786300049, -0.2689414213699951, 1.7615941559557646]);
        assert!((silu_grad(0.0) - 0.5).abs() < 1e-15);
        // silu'(1) = σ(1)(1 + 1·(1-σ(1))) = 0.7310585786300049 · 1.2689414213699951
        assert!((silu_grad(1.0) - 0.9276705118714869).abs() < 1e-15);
        assert!(silu(-1000.0) == 0.0 && silu_grad(-1000.0) == 0.0 && silu_grad(1000.0) == 1.0);
    }

    #[test]
    fn fwd_seq_idx_by_hand() {
        // W=2, w=[2,3]; ids [0,0,1,-1]
        let mut p = base(2, &[1.0, 2.0, 3.0, 4.0], &[2.0, 3.0]);
        p.seq_idx = Some(vec![0, 0, 1, -1]);
        let r = forward(&p);
        close(&r.out, &[3.0, 8.0, 9.0, 0.0]);
        close(&r.final_states, &[0.0]); // last id < 0
        // The initial state belongs to the first token's sequence.
        p.initial_states = Some(vec![10.0]);
        let r = forward(&p);
        close(&r.out, &[23.0, 8.0, 9.0, 0.0]);
        p.seq_idx = Some(vec![0, 0, 1, 1]);
        let r = forward(&p);
        close(&r.out, &[23.0, 8.0, 9.0, 2.0 * 3.0 + 3.0 * 4.0]);
        close(&r.final_states, &[4.0]);
        // W=3 final: positions L-2, L-1 = ids 1, 1 → [3, 4]; with ids [0,0,0,1] → [0, 4].
        let mut q = base(3, &[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0, 1.0]);
        q.seq_idx = Some(vec![0, 0, 1, 1]);
        close(&forward(&q).final_states, &[3.0, 4.0]);
        q.seq_idx = Some(vec![0, 0, 0, 1]);
        close(&forward(&q).final_states, &[0.0, 4.0]);
        // Non-contiguous equal ids do mix (the contract compares ids per position).
        q.seq_idx = Some(vec![0, 1, 0, 0]);
        close(&forward(&q).out, &[1.0, 2.0, 1.0 + 3.0, 3.0 + 4.0]);
    }

    #[test]
    fn bwd_width2_by_hand() {
        // x=[1,2,3], w=[2,3], init [5], dout=[1,10,100], dfinal=[7], identity.
        let mut p = base(2, &[1.0, 2.0, 3.0], &[2.0, 3.0]);
        p.initial_states = Some(vec![5.0]);
        p.bias = Some(vec![0.5]);
        let r = backward(&p, &[1.0, 10.0, 100.0], Some(&[7.0]));
        close(&r.dx, &[23.0, 230.0, 307.0]);
        close(&r.dinitial_states, &[2.0]);
        close(&r.dweight, &[215.0, 321.0]);
        close(&r.dbias, &[111.0]);
        // has_initial_state false: dinit written as 0, and dweight[0] loses g0·5.
        p.has_initial_state = Some(vec![false]);
        let r = backward(&p, &[1.0, 10.0, 100.0], Some(&[7.0]));
        close(&r.dinitial_states, &[0.0]);
        assert_eq!(r.dinit_written, vec![true]);
        close(&r.dweight, &[210.0, 321.0]);
    }

    #[test]
    fn bwd_silu_by_hand() {
        // W=1, w=2, bias 0.5, x=[1]: pre = 2.5; dout=3 → g = 3·silu'(2.5); dx = 2g; dw = g·1.
        let mut p = base(1, &[1.0], &[2.0]);
        p.bias = Some(vec![0.5]);
        p.silu = true;
        let s = 1.0 / (1.0 + (-2.5f64).exp());
        let g = 3.0 * s * (1.0 + 2.5 * (1.0 - s));
        let r = backward(&p, &[3.0], None);
        close(&r.dx, &[2.0 * g]);
        close(&r.dweight, &[g]);
        close(&r.dbias, &[g]);
    }

    #[test]
    fn varlen_by_hand() {
        // Two sequences [1,2] and [3] over T=3 (plus an empty one), W=2, w=[1,10], pool of 4
        // slots, state_indices [2, -1, 0]: sequence 1 (empty) is skipped.
        let p = ConvProblem {
            batch: 1,
            dim: 1,
            seqlen: 3,
            width: 2,
            x: vec![1.0, 2.0, 3.0],
            weight: vec![1.0, 10.0],
            initial_states: Some(vec![100.0, 200.0, 300.0, 400.0]),
            cu_seqlens: Some(vec![0, 2, 2, 3]),
            state_indices: Some(vec![2, -1, 0]),
            has_initial_state: Some(vec![true, true, false]),
            num_slots: 4,
            ..Default::default()
        };
        let r = forward(&p);
        // seq 0 reads slot 2 (300): [300 + 10, 1 + 20]; seq 2 has no init: [0 + 30].
        close(&r.out, &[310.0, 21.0, 30.0]);
        assert_eq!(r.final_written, vec![true, false, true, false]);
        close(&r.final_pool_over(&[100.0, 200.0, 300.0, 400.0], 1, 1), &[3.0, 200.0, 2.0, 400.0]);
        // Skipping the second real sequence zeroes its output.
        let q = ConvProblem { state_indices: Some(vec![2, 1, -1]), ..p.clone() };
        let r = forward(&q);
        close(&r.out, &[310.0, 21.0, 0.0]);
        assert_eq!(r.final_written, vec![false, true, true, false]);
        // Empty sequence: final = its initial state.
        close(&r.final_states[1..2], &[200.0]);
        // Backward: dout = 1 everywhere, dfinal = [1000, 2000, 3000, 4000].
        let b = backward(&p, &[1.0, 1.0, 1.0], Some(&[1000.0, 2000.0, 3000.0, 4000.0]));
        // seq 0 (slot 2): dx0 = 1·g1 + 10·g0 = 11, dx1 = 10·g1 + dfinal[2] = 3010, dinit = 1·g0 = 1.
        // seq 2 (slot 0): dx2 = 10 + 1000; dinit zeros (no init).
        close(&b.dx, &[11.0, 3010.0, 1010.0]);
        assert_eq!(b.dinit_written, vec![true, false, true, false]);
        close(&b.dinitial_states, &[0.0, 0.0, 1.0, 0.0]);
        // dweight[0] = Σ g·xe(t-1) = 300 + 1 + 0; dweight[1] = 1 + 2 + 3.
        close(&b.dweight, &[301.0, 6.0]);
    }

    #[test]
    fn update_matches_ref_examples() {
        // W=3, state_len 3, state [1,2,3], x [4], w [1,10,100].
        let mut p = UpdateProblem {
            batch: 1,
            dim: 1,
            seqlen: 1,
            width: 3,
            state_len: 3,
            x: vec![4.0],
            weight: vec![1.0, 10.0, 100.0],
            conv_state: vec![1.0, 2.0, 3.0],
            ..Default::default()
        };
        let r = update(&p);
        close(&r.out, &[432.0]);
        close(&r.conv_state, &[2.0, 3.0, 4.0]);
        // S = 2.
        p.seqlen = 2;
        p.x = vec![4.0, 5.0];
        let r = update(&p);
        close(&r.out, &[432.0, 543.0]);
        close(&r.conv_state, &[3.0, 4.0, 5.0]);
        // Circular buffer, c = 1: prev = [st[2], st[0]] = [3, 1].
        p.seqlen = 1;
        p.x = vec![4.0];
        p.cache_seqlens = Some(vec![1]);
        let r = update(&p);
        close(&r.out, &[3.0 + 10.0 + 400.0]);
        close(&r.conv_state, &[1.0, 4.0, 3.0]);
        // c = 2, S = 4 > state_len: writes at 2,0,1,2 (the last wins).
        p.seqlen = 4;
        p.x = vec![4.0, 5.0, 6.0, 7.0];
        p.cache_seqlens = Some(vec![2]);
        let r = update(&p);
        // prev = [st[0], st[1]] = [1, 2]; cat = [1,2,4,5,6,7]
        close(&r.out, &[1.0 + 20.0 + 400.0, 2.0 + 40.0 + 500.0, 4.0 + 50.0 + 600.0, 5.0 + 60.0 + 700.0]);
        close(&r.conv_state, &[5.0, 6.0, 7.0]);
        // Padding row: out 0, state untouched.
        p.cache_seqlens = None;
        p.conv_state_indices = Some(vec![-1]);
        let r = update(&p);
        close(&r.out, &[0.0; 4]);
        close(&r.conv_state, &[1.0, 2.0, 3.0]);
        assert_eq!(r.written, vec![false]);
    }

    #[test]
    fn update_state_longer_than_window_with_silu_and_bias() {
        // W=2, state_len 4: uses only the last state element; state shifts by S.
        let p = UpdateProblem {
            batch: 1,
            dim: 1,
            seqlen: 1,
            width: 2,
            state_len: 4,
            silu: true,
            x: vec![1.0],
            weight: vec![0.5, -1.0],
            bias: Some(vec![0.25]),
            conv_state: vec![9.0, 8.0, 7.0, 2.0],
            ..Default::default()
        };
        let r = update(&p);
        close(&r.out, &[silu(0.25 + 1.0 - 1.0)]);
        close(&r.conv_state, &[8.0, 7.0, 2.0, 1.0]);
    }

    /// Finite differences of the forward (as a loss Σ out·dout + Σ final·dfinal) against the
    /// analytic backward, on small problems with every feature.
    #[test]
    fn bwd_matches_finite_differences() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            seed = seed.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        };
        for case in 0..24 {
            let width = 1 + case % 4;
            let k = width - 1;
            let varlen = case % 3 == 2;
            let (batch, seqlen) = if varlen { (1, 7) } else { (2, 5) };
            let dim = 2;
            let mut p = ConvProblem { batch, dim, seqlen, width, silu: case % 2 == 1, ..Default::default() };
            p.x = (0..batch * dim * seqlen).map(|_| rnd() * 2.0 - 1.0).collect();
            p.weight = (0..dim * width).map(|_| rnd() * 2.0 - 1.0).collect();
            p.bias = Some((0..dim).map(|_| rnd() - 0.5).collect());
            if varlen {
                p.cu_seqlens = Some(vec![0, 1, 1, 4, 7]);
                p.state_indices = Some(vec![3, 0, -1, 1]);
                p.has_initial_state = Some(vec![true, true, true, false]);
                p.num_slots = 5;
            } else if case % 3 == 1 {
                p.seq_idx = Some(vec![0, 0, 1, 1, 1, -1, 2, 2, 2, 3]);
            }
            p.initial_states = Some((0..p.slots() * dim * k).map(|_| rnd() * 2.0 - 1.0).collect());
            let dout: Vec<f64> = (0..batch * dim * seqlen).map(|_| rnd() * 2.0 - 1.0).collect();
            let dfin: Vec<f64> = (0..p.slots() * dim * k).map(|_| rnd() * 2.0 - 1.0).collect();
            let loss = |q: &ConvProblem| {
                let r = forward(q);
                let mut l: f64 = r.out.iter().zip(&dout).map(|(a, b)| a * b).sum();
                for (i, (a, b)) in r.final_states.iter().zip(&dfin).enumerate() {
                    if r.final_written[i / (dim * k).max(1)] {
                        l += a * b;
                    }
                }
                l
            };
            let g = backward(&p, &dout, Some(&dfin));
            let h = 1e-6;
            let fd = |f: &dyn Fn(&mut ConvProblem, f64)| {
                let mut a = p.clone();
                f(&mut a, h);
                let mut b = p.clone();
                f(&mut b, -h);
                (loss(&a) - loss(&b)) / (2.0 * h)
            };
            let near = |what: &str, i: usize, a: f64, b: f64| {
                assert!((a - b).abs() < 1e-6 * (1.0 + b.abs()), "case {case}: {what}[{i}] analytic {a} vs fd {b}");
            };
            for i in 0..p.x.len() {
                near("dx", i, g.dx[i], fd(&|q, e| q.x[i] += e));
            }
            for i in 0..p.weight.len() {
                near("dweight", i, g.dweight[i], fd(&|q, e| q.weight[i] += e));
            }
            for i in 0..dim {
                near("dbias", i, g.dbias[i], fd(&|q, e| q.bias.as_mut().unwrap()[i] += e));
            }
            for i in 0..p.initial_states.as_ref().unwrap().len() {
                let slot = i / (dim * k).max(1);
                let num = fd(&|q, e| q.initial_states.as_mut().unwrap()[i] += e);
                if g.dinit_written[slot] {
                    near("dinitial_states", i, g.dinitial_states[i], num);
                } else {
                    assert_eq!(num, 0.0, "case {case}: unread slot {slot} has a gradient");
                }
            }
        }
    }

    #[test]
    fn rounding_is_nearest_even() {
        let e = |p: i32| 2f64.powi(p);
        assert_eq!(round_to(DType::F32, 1.0 + e(-24)), 1.0);
        assert_eq!(round_to(DType::F32, 1.0 + 3.0 * e(-24)), 1.0 + e(-22));
        assert_eq!(round_to(DType::F16, 1.0 + e(-11)), 1.0);
        assert_eq!(round_to(DType::F16, 1.0 + 3.0 * e(-11)), 1.0 + e(-9));
        assert_eq!(round_to(DType::F16, 1.0 + 1.1 * e(-11)), 1.0 + e(-10));
        assert_eq!(round_to(DType::BF16, 1.0 + e(-8)), 1.0);
        assert_eq!(round_to(DType::BF16, 1.0 + 3.0 * e(-8)), 1.0 + e(-6));
        assert_eq!(round_to(DType::BF16, 3.14159), 3.140625);
        assert_eq!(round_to(DType::F16, 3.14159), 3.140625);
        assert_eq!(round_to(DType::F16, 70000.0), f64::INFINITY);
    }

    #[test]
    fn check_catches_what_it_should() {
        let want: Vec<f64> = (0..1000).map(|i| round_to(DType::F32, 1.0 + (i % 7) as f64 + 0.123)).collect();
        let mag: Vec<f64> = want.iter().map(|w| 3.0 * w.abs()).collect();
        let f32t = Tol::elementwise(DType::F32);
        let mut got = want.clone();
        assert!(check("t", &got, &want, &mag, &f32t).is_ok());
        // One element off by 0.01 % is far inside the norm but not elementwise.
        got[500] *= 1.0001;
        let e = check("t", &got, &want, &mag, &f32t).unwrap_err();
        assert!(e.contains("worst element 500"), "{e}");
        // A NaN (unwritten) always fails.
        got[500] = f64::NAN;
        assert!(check("t", &got, &want, &mag, &Tol { dt: DType::F32, rel: 1.0, acc: 1.0 }).is_err());
        // Elements without terms must be exactly 0.
        let (mut want0, mut mag0) = (want.clone(), mag.clone());
        (want0[3], mag0[3]) = (0.0, 0.0);
        let mut got0 = want0.clone();
        got0[3] = 1e-30;
        assert!(check("t", &got0, &want0, &mag0, &Tol::elementwise(DType::BF16)).is_err());
        got0[3] = -0.0;
        assert!(check("t", &got0, &want0, &mag0, &Tol::elementwise(DType::BF16)).is_ok());
        // A sum that cancels is judged against its terms: want 1e-3 from terms of size 100.
        let t = Tol::reduction(DType::F32, 1000);
        assert!(check("t", &[1e-3 + 1e-4], &[1e-3], &[100.0], &t).is_ok());
        assert!(check("t", &[1e-3 + 1e-1], &[1e-3], &[100.0], &t).is_err());
        // Relative error is ‖a−b‖/‖b‖.
        let e = err_stats(&[3.0, 4.0 + 0.5], &[3.0, 4.0], &[3.0, 4.0], &f32t);
        assert!((e.rel - 0.1).abs() < 1e-15 && (e.max_abs - 0.5).abs() < 1e-15);
        assert!(err_stats(&[1.0], &[0.0], &[1.0], &f32t).rel.is_infinite());
        // The reduction allowance grows with √n.
        let extra = |n| reduction_acc(n) - elementwise_acc();
        assert!((extra(16384) / extra(1) - 128.0).abs() < 1e-9);
    }

    /// Correctly rounded low-precision outputs pass; truncated ones (round toward zero, a
    /// classic bf16 `bits >> 16` bug) fail, although both are inside the norm tolerance.
    #[test]
    fn check_tells_rounding_from_truncation() {
        let exact: Vec<f64> = (0..2000).map(|i| ((i as f64) * 0.7548776662).sin() * 3.0 + 0.01).collect();
        let mag: Vec<f64> = exact.iter().map(|v| 2.0 * v.abs() + 1.0).collect();
        for dt in [DType::F16, DType::BF16] {
            let tol = Tol::elementwise(dt);
            let rne = round_all(dt, &exact);
            assert!(check("rne", &rne, &exact, &mag, &tol).is_ok(), "{dt:?}");
            let trunc: Vec<f64> = exact
                .iter()
                .map(|&v| match dt {
                    DType::BF16 => f32::from_bits((v as f32).to_bits() & 0xFFFF_0000) as f64,
                    _ => {
                        let r = round_to(dt, v);
                        if r.abs() > v.abs() {
                            r - v.signum() * 2.0 * half_ulp(dt, r.abs() * (1.0 - 1e-12))
                        } else {
                            r
                        }
                    }
                })
                .collect();
            assert!(check("trunc", &trunc, &exact, &mag, &tol).is_err(), "{dt:?} truncation passed");
            assert!(err_stats(&trunc, &exact, &mag, &tol).rel < tolerance(dt));
        }
        assert_eq!(half_ulp(DType::F16, 1.0), 2f64.powi(-11));
        assert_eq!(half_ulp(DType::F16, 1.5), 2f64.powi(-11));
        assert_eq!(half_ulp(DType::F16, 2.0), 2f64.powi(-10));
        assert_eq!(half_ulp(DType::BF16, 0.75), 2f64.powi(-9));
        assert_eq!(half_ulp(DType::F16, 1e-7), 2f64.powi(-25));
        assert_eq!(half_ulp(DType::F32, 1.0), 2f64.powi(-24));
    }

    /// The error magnitudes: Σ|terms| by hand, and 0 exactly where an output has no terms.
    #[test]
    fn magnitudes_by_hand() {
        // out[t] = 1 + 2·x[t-1] + 3·x[t], x = [1, -2]: mags 1+0+3, 1+2+6.
        let mut p = base(2, &[1.0, -2.0], &[2.0, 3.0]);
        p.bias = Some(vec![1.0]);
        let r = forward(&p);
        close(&r.out, &[4.0, -3.0]);
        close(&r.out_mag, &[4.0, 9.0]);
        // Backward, dout = [1, -1]: g = dout; dx[0] = 2·g1 + 3·g0 (mag 5), dx[1] = 3·g1 (mag 3);
        // dweight[0] = g1·x0 (mag 1), dweight[1] = g0·x0 + g1·x1 (mag 3); dbias mag 2.
        let b = backward(&p, &[1.0, -1.0], None);
        close(&b.dx, &[1.0, -3.0]);
        close(&b.dx_mag, &[5.0, 3.0]);
        close(&b.dweight, &[-1.0, 3.0]);
        close(&b.dweight_mag, &[1.0, 3.0]);
        close(&b.dbias_mag, &[2.0]);
        // Padding ids and skipped sequences have no terms.
        p.seq_idx = Some(vec![0, -1]);
        let r = forward(&p);
        close(&r.out_mag[1..], &[0.0]);
        let b = backward(&p, &[1.0, -1.0], None);
        // dx[1] gets nothing: its only reader t=1 is padding.
        close(&b.dx_mag[1..], &[0.0]);
    }
}
