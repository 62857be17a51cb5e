//! Validated plans: what a backend receives. Everything here has been checked by `validate.rs`
//! (codes known, dims non-negative, offsets fit in i64, shapes consistent, no forbidden overlap,
//! host-readable indices in range for the CPU backend); backends trust it and never re-check.
//! Addresses are `usize` so plans are `Send + Sync` for worker threads.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }
    pub fn code(self) -> i32 {
        match self {
            DType::F32 => crate::params::CCV1D_DTYPE_F32,
            DType::F16 => crate::params::CCV1D_DTYPE_F16,
            DType::BF16 => crate::params::CCV1D_DTYPE_BF16,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    None,
    Silu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Gpu,
}

/// A float tensor: base address, dtype, element strides per logical dim.
#[derive(Clone, Copy, Debug)]
pub struct View {
    pub addr: usize,
    pub dtype: DType,
    pub stride: [i64; 3],
}

/// An int32 tensor (or, for `has_initial_state`, int32 or 1-byte bool: `elem_bytes`).
#[derive(Clone, Copy, Debug)]
pub struct IdxView {
    pub addr: usize,
    pub stride: [i64; 2],
    /// 4 (int32) or 1 (bool).
    pub elem_bytes: u8,
}

/// How tokens group into sequences.
#[derive(Clone, Copy, Debug)]
pub enum Seqs {
    /// Each batch row is one sequence (optionally split further by `seq_idx`).
    Rows,
    /// Batch of 1, sequence `i` owns tokens `[cu[i], cu[i+1])`.
    Packed { cu_seqlens: IdxView, num_seqs: i64 },
}

/// Where each sequence's states live. `slot(i) = state_indices[i]` or `i`; `< 0` skips the sequence.
#[derive(Clone, Copy, Debug)]
pub struct StatePool {
    pub state_indices: Option<IdxView>,
    pub has_initial_state: Option<IdxView>,
    /// First dim of every state tensor.
    pub num_slots: i64,
}

/// What forward and backward share: the inputs of the convolution.
#[derive(Clone, Copy, Debug)]
pub struct ConvInputs {
    pub backend: Backend,
    /// cudaStream_t / hipStream_t as an integer (0 = default stream); ignored on the CPU.
    pub stream: usize,
    pub batch: i64,
    pub dim: i64,
    pub seqlen: i64,
    pub width: i64,
    pub act: Act,
    /// `[batch, dim, seqlen]`.
    pub x: View,
    /// `[dim, width]`.
    pub weight: View,
    /// `[dim]` (stride[0]).
    pub bias: Option<View>,
    /// `[batch, seqlen]`; never together with `Seqs::Packed`.
    pub seq_idx: Option<IdxView>,
    /// `[num_slots, dim, width-1]`.
    pub initial_states: Option<View>,
    pub seqs: Seqs,
    pub pool: StatePool,
}

impl ConvInputs {
    /// Number of sequences: batch rows, or `num_seqs` when packed.
    pub fn num_seqs(&self) -> i64 {
        match self.seqs {
            Seqs::Rows => self.batch,
            Seqs::Packed { num_seqs, .. } => num_seqs,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct FwdPlan {
    pub inp: ConvInputs,
    /// `[batch, dim, seqlen]`, x's dtype.
    pub out: View,
    /// `[num_slots, dim, width-1]`; may be the same memory as `inp.initial_states`.
    pub final_states: Option<View>,
}

#[derive(Clone, Copy, Debug)]
pub struct BwdPlan {
    pub inp: ConvInputs,
    pub dout: View,
    pub dfinal_states: Option<View>,
    pub dx: View,
    /// `[dim, width]`.
    pub dweight: View,
    pub dbias: Option<View>,
    pub dinitial_states: Option<View>,
    /// Caller's workspace `(addr, bytes)`; None = the backend's own.
    pub workspace: Option<(usize, usize)>,
    pub deterministic: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct UpdatePlan {
    pub backend: Backend,
    pub stream: usize,
    pub batch: i64,
    pub dim: i64,
    pub seqlen: i64,
    pub width: i64,
    pub state_len: i64,
    pub num_slots: i64,
    pub act: Act,
    pub x: View,
    pub weight: View,
    pub bias: Option<View>,
    /// May be the same memory as x.
    pub out: View,
    /// `[num_slots, dim, state_len]`.
    pub conv_state: View,
    pub cache_seqlens: Option<IdxView>,
    pub conv_state_indices: Option<IdxView>,
}
