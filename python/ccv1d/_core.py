"""One call of ccv1d_fwd / ccv1d_bwd / ccv1d_update on arrays the caller has allocated.

Framework-agnostic: numpy arrays, torch CPU tensors (CPU backend) and torch CUDA tensors (GPU
backend, on torch's current stream). The frontends (ccv1d/_api.py, ccv1d/_torch_ops.py) allocate
the outputs; these functions only describe, check shapes/devices, and call.
"""
from ._lib import (ACT_NONE, ACT_SILU, ERR_SHAPE, Ccv1dError, bwd_workspace_size,
                   ccv1d_bwd_params, ccv1d_fwd_params, ccv1d_update_params, new_params)
from ._views import Binder, device_of, is_torch


def stream_of(x):
    """torch's current stream on x's device as a void*, or None (CPU: ignored by the library)."""
    if is_torch(x) and x.device.type == "cuda":
        import torch
        return torch.cuda.current_stream(x.device).cuda_stream
    return None


def dims(x, weight, fn):
    """(batch, dim, seqlen, width) from x [B, D, L] and weight [D, W]."""
    if len(x.shape) != 3:
        raise Ccv1dError(ERR_SHAPE, f"x has shape {tuple(x.shape)}, expected 3 dims (batch, dim, seqlen)", fn)
    if len(weight.shape) != 2:
        raise Ccv1dError(ERR_SHAPE, f"weight has shape {tuple(weight.shape)}, expected 2 dims (dim, width)", fn)
    B, D, L = (int(v) for v in x.shape)
    return B, D, L, int(weight.shape[1])


def num_seqs_of(cu_seqlens, batch, fn):
    if cu_seqlens is None:
        return batch
    if len(cu_seqlens.shape) != 1 or cu_seqlens.shape[0] < 1:
        raise Ccv1dError(ERR_SHAPE, f"cu_seqlens has shape {tuple(cu_seqlens.shape)}, expected (num_seqs + 1,)", fn)
    return int(cu_seqlens.shape[0]) - 1


class ConvArgs:
    """The inputs forward and backward share (the fields of ConvFields in src/validate.rs)."""

    def __init__(self, x, weight, bias=None, seq_idx=None, initial_states=None, cu_seqlens=None,
                 state_indices=None, has_initial_state=None, num_state_slots=0, silu=False):
        self.x, self.weight, self.bias, self.seq_idx = x, weight, bias, seq_idx
        self.initial_states, self.cu_seqlens = initial_states, cu_seqlens
        self.state_indices, self.has_initial_state = state_indices, has_initial_state
        self.num_state_slots, self.silu = int(num_state_slots), bool(silu)

    def fill(self, p, fn):
        """Bind the shared fields into params `p`; return (binder, dims, slots)."""
        B, D, L, W = dims(self.x, self.weight, fn)
        nseq = num_seqs_of(self.cu_seqlens, B, fn)
        slots = self.num_state_slots or nseq
        b = Binder(fn, device_of(self.x))
        p.backend = b.backend()
        p.activation = ACT_SILU if self.silu else ACT_NONE
        p.batch, p.dim, p.seqlen, p.width = B, D, L, W
        p.num_seqs = nseq if self.cu_seqlens is not None else 0
        p.num_state_slots = self.num_state_slots
        p.x = b.bind(self.x, "x", (B, D, L), optional=False)
        p.weight = b.bind(self.weight, "weight", (D, W), optional=False)
        p.bias = b.bind(self.bias, "bias", (D,))
        p.seq_idx = b.bind(self.seq_idx, "seq_idx", (B, L))
        p.initial_states = b.bind(self.initial_states, "initial_states", (slots, D, max(W - 1, 0)))
        p.cu_seqlens = b.bind(self.cu_seqlens, "cu_seqlens", (nseq + 1,))
        p.state_indices = b.bind(self.state_indices, "state_indices", (nseq,))
        p.has_initial_state = b.bind(self.has_initial_state, "has_initial_state", (nseq,))
        return b, (B, D, L, W), slots


def run_fwd(a, out, final_states=None, fn="ccv1d_fwd"):
    """Forward into `out` (and `final_states`)."""
    p = new_params(ccv1d_fwd_params)
    b, (B, D, L, W), slots = a.fill(p, fn)
    p.out = b.bind(out, "out", (B, D, L), optional=False)
    p.final_states = b.bind(final_states, "final_states", (slots, D, max(W - 1, 0)))
    b.call("ccv1d_fwd", p, stream_of(a.x))


def run_bwd(a, dout, dx, dweight, dbias=None, dinitial_states=None, dfinal_states=None,
            alloc_workspace=None, fn="ccv1d_bwd"):
    """Backward into dx, dweight (and dbias, dinitial_states).

    alloc_workspace(nbytes) -> tensor, for the GPU: the scratch then comes from the caller's
    allocator (torch's caching allocator) instead of the library's stream-ordered pool.
    """
    p = new_params(ccv1d_bwd_params)
    b, (B, D, L, W), slots = a.fill(p, fn)
    K = max(W - 1, 0)
    p.dout = b.bind(dout, "dout", (B, D, L), optional=False)
    p.dfinal_states = b.bind(dfinal_states, "dfinal_states", (slots, D, K))
    p.dx = b.bind(dx, "dx", (B, D, L), optional=False)
    p.dweight = b.bind(dweight, "dweight", (D, W), optional=False)
    p.dbias = b.bind(dbias, "dbias", (D,))
    p.dinitial_states = b.bind(dinitial_states, "dinitial_states", (slots, D, K))
    workspace = None
    if alloc_workspace is not None and device_of(a.x) != "cpu":
        nbytes = bwd_workspace_size(p)
        if nbytes:
            workspace = alloc_workspace(nbytes)
            p.workspace, p.workspace_size = workspace.data_ptr(), nbytes
    b.call("ccv1d_bwd", p, stream_of(a.x))
    del workspace  # freed after the launch: torch's allocator orders the reuse on this stream


def run_update(x, conv_state, weight, out, bias=None, silu=False, cache_seqlens=None,
               conv_state_indices=None, fn="ccv1d_update"):
    """Decode update: x [B, D, S], conv_state [slots, D, state_len] (updated in place) -> out."""
    B, D, S, W = dims(x, weight, fn)
    if len(conv_state.shape) != 3:
        raise Ccv1dError(ERR_SHAPE, f"conv_state has shape {tuple(conv_state.shape)}, expected 3 dims "
                                    "(num_state_slots, dim, state_len)", fn)
    slots, state_len = int(conv_state.shape[0]), int(conv_state.shape[2])
    p = new_params(ccv1d_update_params, batch=B, dim=D, seqlen=S, width=W, state_len=state_len,
                   num_state_slots=slots, activation=ACT_SILU if silu else ACT_NONE)
    b = Binder(fn, device_of(x))
    p.backend = b.backend()
    p.x = b.bind(x, "x", (B, D, S), optional=False)
    p.weight = b.bind(weight, "weight", (D, W), optional=False)
    p.bias = b.bind(bias, "bias", (D,))
    p.out = b.bind(out, "out", (B, D, S), optional=False)
    p.conv_state = b.bind(conv_state, "conv_state", (slots, D, state_len), optional=False)
    p.cache_seqlens = b.bind(cache_seqlens, "cache_seqlens", (B,))
    p.conv_state_indices = b.bind(conv_state_indices, "conv_state_indices", (B,))
    if conv_state_indices is None and slots < B:
        # The library would reject this too; say it in the frontend's terms.
        raise Ccv1dError(ERR_SHAPE, f"conv_state has {slots} slots for batch {B} and no conv_state_indices", fn)
    b.call("ccv1d_update", p, stream_of(x))
