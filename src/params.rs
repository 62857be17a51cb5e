//! The public `#[repr(C)]` structs of the C API and the codes they carry.
//! See docs/semantics.md for what each field means; `validate.rs` turns them into a `plan`.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

pub const CCV1D_DTYPE_F32: i32 = 1;
pub const CCV1D_DTYPE_F16: i32 = 2;
pub const CCV1D_DTYPE_BF16: i32 = 3;
pub const CCV1D_DTYPE_I32: i32 = 4;
/// One byte per element, nonzero = true (only for `has_initial_state`).
pub const CCV1D_DTYPE_BOOL: i32 = 5;

pub const CCV1D_ACT_NONE: i32 = 0;
pub const CCV1D_ACT_SILU: i32 = 1;

/// AUTO picks the GPU when `x` is device memory (and a GPU backend is compiled in), else the CPU.
pub const CCV1D_BACKEND_AUTO: i32 = 0;
pub const CCV1D_BACKEND_CPU: i32 = 1;
pub const CCV1D_BACKEND_GPU: i32 = 2;

/// Bits of `ccv1d_backends_compiled()`.
pub const CCV1D_HAVE_CPU: u32 = 1;
pub const CCV1D_HAVE_CUDA: u32 = 2;
pub const CCV1D_HAVE_ROCM: u32 = 4;

/// A strided view of a tensor. The shape comes from the params struct (each field documents its
/// logical dims); `stride[i]` is the step, in elements, of logical dim `i` (unused entries are
/// ignored). `data == NULL` means "absent" for optional tensors.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ccv1d_tensor {
    pub data: *mut c_void,
    /// One of `CCV1D_DTYPE_*`.
    pub dtype: i32,
    pub stride: [i64; 3],
}

impl Default for ccv1d_tensor {
    fn default() -> Self {
        ccv1d_tensor { data: std::ptr::null_mut(), dtype: 0, stride: [0; 3] }
    }
}

/// Forward: `out = act(conv(x, weight) + bias)`, optionally with sequence ids, initial/final
/// states and packed variable-length sequences.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ccv1d_fwd_params {
    /// `sizeof(ccv1d_fwd_params)`: lets later versions grow the struct.
    pub struct_size: u32,
    /// `CCV1D_BACKEND_*`.
    pub backend: i32,
    /// `CCV1D_ACT_*`.
    pub activation: i32,
    pub batch: i64,
    pub dim: i64,
    pub seqlen: i64,
    /// 1..=8.
    pub width: i64,
    /// `[batch, dim, seqlen]`, f32/f16/bf16.
    pub x: ccv1d_tensor,
    /// `[dim, width]`, any float dtype.
    pub weight: ccv1d_tensor,
    /// `[dim]`, any float dtype; optional.
    pub bias: ccv1d_tensor,
    /// `[batch, dim, seqlen]`, x's dtype.
    pub out: ccv1d_tensor,
    /// int32 `[batch, seqlen]`; optional; tokens of different ids do not mix, id < 0 gives 0.
    pub seq_idx: ccv1d_tensor,
    /// `[num_state_slots, dim, width-1]`, oldest first, x's dtype; optional.
    pub initial_states: ccv1d_tensor,
    /// `[num_state_slots, dim, width-1]`, x's dtype; optional output (may equal initial_states).
    pub final_states: ccv1d_tensor,
    /// int32 `[num_seqs+1]`; optional; packed sequences over a batch of 1.
    pub cu_seqlens: ccv1d_tensor,
    /// int32 `[num_seqs]` (or `[batch]` without cu_seqlens): state slot per sequence, < 0 = skip.
    pub state_indices: ccv1d_tensor,
    /// int32 or bool `[num_seqs]` (or `[batch]`): read initial_states for this sequence.
    pub has_initial_state: ccv1d_tensor,
    /// Number of sequences in `cu_seqlens` (ignored without it: the sequences are the batch rows).
    pub num_seqs: i64,
    /// Slots in the state tensors; 0 = as many as sequences.
    pub num_state_slots: i64,
}

/// Backward: dx, dweight, dbias, dinitial_states from dout (and dfinal_states).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ccv1d_bwd_params {
    pub struct_size: u32,
    pub backend: i32,
    pub activation: i32,
    pub batch: i64,
    pub dim: i64,
    pub seqlen: i64,
    pub width: i64,
    /// Inputs of the forward call.
    pub x: ccv1d_tensor,
    pub weight: ccv1d_tensor,
    pub bias: ccv1d_tensor,
    pub seq_idx: ccv1d_tensor,
    pub initial_states: ccv1d_tensor,
    pub cu_seqlens: ccv1d_tensor,
    pub state_indices: ccv1d_tensor,
    pub has_initial_state: ccv1d_tensor,
    pub num_seqs: i64,
    pub num_state_slots: i64,
    /// `[batch, dim, seqlen]`, x's dtype: gradient of out.
    pub dout: ccv1d_tensor,
    /// `[num_state_slots, dim, width-1]`: gradient of final_states; optional.
    pub dfinal_states: ccv1d_tensor,
    /// `[batch, dim, seqlen]`, x's dtype. Required.
    pub dx: ccv1d_tensor,
    /// `[dim, width]`, f32 or any float dtype. Required; overwritten.
    pub dweight: ccv1d_tensor,
    /// `[dim]`; optional (requires bias); overwritten.
    pub dbias: ccv1d_tensor,
    /// `[num_state_slots, dim, width-1]`, x's dtype; optional (requires initial_states).
    pub dinitial_states: ccv1d_tensor,
    /// Caller's scratch (device memory on the GPU, 16-byte aligned, at least
    /// `ccv1d_bwd_workspace_size` bytes); NULL = the library's stream-ordered pool.
    pub workspace: *mut c_void,
    pub workspace_size: usize,
    /// 0 (default): dweight/dbias bitwise reproducible. 1: the backend may use atomics.
    pub nondeterministic: i32,
}

/// Decode-time update: convolve `seqlen` new tokens against a rolling `conv_state`, in place.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ccv1d_update_params {
    pub struct_size: u32,
    pub backend: i32,
    pub activation: i32,
    pub batch: i64,
    pub dim: i64,
    /// New tokens per row (≥ 1).
    pub seqlen: i64,
    pub width: i64,
    /// ≥ width-1.
    pub state_len: i64,
    /// Slots in conv_state; 0 = batch.
    pub num_state_slots: i64,
    /// `[batch, dim, seqlen]`.
    pub x: ccv1d_tensor,
    pub weight: ccv1d_tensor,
    pub bias: ccv1d_tensor,
    /// `[batch, dim, seqlen]`, x's dtype; may be exactly x (in place).
    pub out: ccv1d_tensor,
    /// `[num_state_slots, dim, state_len]`, x's dtype; read and written.
    pub conv_state: ccv1d_tensor,
    /// int32 `[batch]`; optional; makes conv_state a circular buffer.
    pub cache_seqlens: ccv1d_tensor,
    /// int32 `[batch]`; optional; slot per row, < 0 = padding row (out 0, state untouched).
    pub conv_state_indices: ccv1d_tensor,
}
