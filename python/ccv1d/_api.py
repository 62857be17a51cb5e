"""The public functions, with Dao-AILab causal-conv1d's signatures and semantics.

numpy arrays and torch CPU tensors run on the library's CPU backend, torch CUDA tensors on its
GPU backend (torch's current stream). torch tensors go through the custom ops of _torch_ops.py
(autograd, torch.compile); numpy arrays call the library directly.
"""
from . import _alloc
from ._core import ConvArgs, dims, num_seqs_of, run_bwd, run_fwd, run_update
from ._lib import ERR_ACTIVATION, ERR_SHAPE, Ccv1dActivationError, Ccv1dError
from ._views import is_torch


def _silu(activation, fn):
    if activation not in (None, "silu", "swish"):
        raise Ccv1dActivationError(ERR_ACTIVATION, f"activation must be None, 'silu' or 'swish', got {activation!r}", fn)
    return activation in ("silu", "swish")


def _ops():
    from . import _torch_ops
    return _torch_ops


def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None,
                     return_final_states=False, final_states_out=None, activation=None):
    """out = act(conv1d(x, weight, causal) + bias), Dao-AILab's `causal_conv1d_fn`.

    x: (batch, dim, seqlen); channel-last memory when x.stride(1) == 1 (e.g. a transposed
       (batch, seqlen, dim) tensor) -- any other strides work too, without a copy.
    weight: (dim, width), width 1..8.  bias: (dim,) or None.  Weight and bias may each be
       f32/f16/bf16 independently of x; x is f32/f16/bf16 (numpy: f32/f16).
    seq_idx: (batch, seqlen) int32 or None: tokens of different ids do not mix; id < 0 is
       padding (output 0). Unlike Dao's CUDA code, it may be combined with initial_states and
       return_final_states (the initial state belongs to the first token's sequence).
    initial_states: (batch, dim, width - 1) or None, oldest first.
    return_final_states: also return final_states (batch, dim, width - 1) (any layout of x;
       Dao requires channel-last). final_states_out, if given, receives them (only with
       return_final_states, as in Dao) and is what is returned.
    activation: None, "silu" or "swish".
    Returns out (batch, dim, seqlen) in x's dtype and memory order, or (out, final_states).
    torch: differentiable in x, weight, bias and initial_states (backward = ccv1d_bwd).
    """
    fn = "causal_conv1d_fn"
    silu = _silu(activation, fn)
    want_final = bool(return_final_states)
    if is_torch(x):
        out, final = _ops().fwd(x, weight, bias, seq_idx, initial_states, None, None, None, 0, silu, want_final)
        if not want_final:
            return out
        if final_states_out is not None:
            final_states_out.copy_(final)
            final = final_states_out
        return out, final
    out = _alloc.empty_like(x)
    final = None
    if want_final:
        B, D, _, W = dims(x, weight, fn)
        final = final_states_out if final_states_out is not None else _alloc.states(x, B, D, max(W - 1, 0), zero=False)
    run_fwd(ConvArgs(x, weight, bias, seq_idx, initial_states, silu=silu), out, final, fn=fn)
    return (out, final) if want_final else out


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx=None, initial_states=None, dfinal_states=None,
                      dx=None, return_dinitial_states=False, activation=None, cu_seqlens=None,
                      state_indices=None, has_initial_state=None, num_state_slots=0):
    """The backward of causal_conv1d_fn / causal_conv1d_varlen_fn as a plain call (no autograd),
    like Dao's `causal_conv1d_cuda.causal_conv1d_bwd`: returns (dx, dweight, dbias, dinitial_states).

    dout: (batch, dim, seqlen); dfinal_states: gradient of final_states or None. dweight has
    weight's dtype, dbias bias's (None without bias); dinitial_states is None unless
    return_dinitial_states (needs initial_states). dx, if given, is written and returned.
    The varlen arguments are as in causal_conv1d_varlen_fn with x of shape (1, dim, T).
    """
    fn = "causal_conv1d_bwd"
    silu = _silu(activation, fn)
    B, D, _, W = dims(x, weight, fn)
    slots = num_state_slots or num_seqs_of(cu_seqlens, B, fn)
    dx = _alloc.empty_like(x) if dx is None else dx
    dweight = _alloc.empty(tuple(weight.shape), weight)
    dbias = _alloc.empty(tuple(bias.shape), bias) if bias is not None else None
    dinit = _alloc.states(x, slots, D, max(W - 1, 0), zero=True) if return_dinitial_states else None
    work = None
    if is_torch(x):
        import torch
        work = lambda n: torch.empty(n, dtype=torch.uint8, device=x.device)  # noqa: E731
    args = ConvArgs(x, weight, bias, seq_idx, initial_states, cu_seqlens, state_indices, has_initial_state,
                    num_state_slots, silu)
    run_bwd(args, dout, dx, dweight, dbias, dinit, dfinal_states, alloc_workspace=work, fn=fn)
    return dx, dweight, dbias, dinit


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None):
    """Decode step(s), Dao-AILab's `causal_conv1d_update`; conv_state is updated in place.

    x: (batch, dim) or (batch, dim, seqlen) new tokens.
    conv_state: (num_slots, dim, state_len), state_len >= width - 1, x's dtype; num_slots >= batch
       unless conv_state_indices maps rows to slots.
    cache_seqlens: (batch,) int32 or None: conv_state is a circular buffer; row b's tokens are
       written at (cache_seqlens[b] + s) % state_len and the window is read behind that position.
    conv_state_indices: (batch,) int32 or None: slot of each row; a negative index (vLLM's
       PAD_SLOT_ID = -1) marks a padding row: its output is 0 and no state is touched.
    Returns out shaped like x. Not differentiable (no backward, as in Dao).
    """
    fn = "causal_conv1d_update"
    silu = _silu(activation, fn)
    squeeze = len(x.shape) == 2
    x3 = (x.unsqueeze(-1) if is_torch(x) else x[:, :, None]) if squeeze else x
    if is_torch(x):
        out = _ops().update_op(x3, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices)
    else:
        out = _alloc.empty_like(x3)
        run_update(x3, conv_state, weight, out, bias, silu, cache_seqlens, conv_state_indices, fn=fn)
    return out[:, :, 0] if squeeze else out


def causal_conv1d_varlen_fn(x, weight, bias=None, cu_seqlens=None, conv_states=None, state_indices=None,
                            has_initial_state=None, activation=None, initial_states=None,
                            return_final_states=False, pad_slot_id=-1):
    """Packed variable-length forward (the serving prefill path; vLLM's `causal_conv1d_fn` with
    query_start_loc / cache_indices / has_initial_state / conv_states).

    x: (dim, total_tokens) as in vLLM, or (1, dim, total_tokens); sequences concatenated.
    cu_seqlens: (num_seqs + 1,) int32, cu[0] = 0, non-decreasing, cu[-1] = total_tokens
       (vLLM's query_start_loc)                              -> library field cu_seqlens.
    conv_states: (num_slots, dim, width - 1) state pool in x's dtype, read as the initial state
       and overwritten with the final state of each sequence, in place (vLLM's conv_states)
                                                             -> initial_states = final_states.
    state_indices: (num_seqs,) int32 slot per sequence, default i (vLLM's cache_indices); an
       index equal to pad_slot_id (or any negative one) skips the sequence: output 0, no state
       read or written                                       -> state_indices (pad -> -1).
    has_initial_state: (num_seqs,) bool or int32: sequence i starts from its slot's state when
       true, from zeros otherwise. None means every sequence reads its slot (the library's rule;
       pass it explicitly when porting from vLLM)           -> has_initial_state.
    initial_states / return_final_states: the functional (differentiable) form instead of
       conv_states: initial_states (num_slots, dim, width - 1) is only read, and final_states is
       returned as a new (num_slots, dim, width - 1) tensor, zero in slots no sequence wrote
       (num_slots = initial_states.shape[0], else num_seqs).
    activation: None, "silu" or "swish".
    Returns out shaped like x (a new tensor; x is never overwritten, as some older vLLM versions did), or
    (out, final_states) with return_final_states.
    torch: differentiable in x, weight, bias, initial_states without conv_states; with
    conv_states it is an in-place custom op (torch.compile-able, no autograd).
    """
    fn = "causal_conv1d_varlen_fn"
    silu = _silu(activation, fn)
    if cu_seqlens is None:
        raise Ccv1dError(ERR_SHAPE, "cu_seqlens is required", fn)
    if conv_states is not None and (initial_states is not None or return_final_states):
        raise Ccv1dError(ERR_SHAPE, "conv_states (in place) cannot be combined with initial_states or "
                                    "return_final_states (the functional form)", fn)
    torch_in = is_torch(x)
    squeeze = len(x.shape) == 2
    x3 = (x.unsqueeze(0) if torch_in else x[None]) if squeeze else x
    if state_indices is not None and pad_slot_id is not None and pad_slot_id >= 0:
        pad = state_indices == pad_slot_id
        if torch_in:
            import torch
            state_indices = torch.where(pad, torch.full_like(state_indices, -1), state_indices)
        else:
            import numpy as np
            state_indices = np.where(pad, np.int32(-1), state_indices).astype(state_indices.dtype)
    final = None
    if conv_states is not None:
        if torch_in:
            out = _ops().varlen_states_op(x3, weight, bias, cu_seqlens, conv_states, state_indices,
                                          has_initial_state, silu)
        else:
            out = _alloc.empty_like(x3)
            args = ConvArgs(x3, weight, bias, None, conv_states, cu_seqlens, state_indices, has_initial_state,
                            conv_states.shape[0], silu)
            run_fwd(args, out, conv_states, fn=fn)
    else:
        slots = int(initial_states.shape[0]) if initial_states is not None else 0
        if torch_in:
            out, final = _ops().fwd(x3, weight, bias, None, initial_states, cu_seqlens, state_indices,
                                    has_initial_state, slots, silu, bool(return_final_states))
        else:
            out = _alloc.empty_like(x3)
            if return_final_states:
                _, D, _, W = dims(x3, weight, fn)
                final = _alloc.states(x3, slots or num_seqs_of(cu_seqlens, 1, fn), D, max(W - 1, 0), zero=True)
            args = ConvArgs(x3, weight, bias, None, initial_states, cu_seqlens, state_indices, has_initial_state,
                            slots, silu)
            run_fwd(args, out, final, fn=fn)
    out = out[0] if squeeze else out
    return (out, final) if return_final_states else out
