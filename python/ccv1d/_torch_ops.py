"""torch integration: the library's calls as torch.library custom ops (autograd + fake kernels,
so torch.compile traces them without a graph break), with a plain torch.autograd.Function
fallback for torch versions without torch.library.custom_op (< 2.4).

Ops (namespace "ccv1d"):
  fwd(x, weight, bias?, seq_idx?, initial_states?, cu_seqlens?, state_indices?, has_initial_state?,
      num_state_slots, silu, want_final) -> (out, final_states)          functional, differentiable
  bwd(..same inputs.., dout, dfinal_states?, want_dinitial) -> (dx, dweight, dbias, dinitial_states)
  update(x, conv_state!, weight, bias?, silu, cache_seqlens?, conv_state_indices?) -> out
  varlen_fwd_states(x, weight, bias?, cu_seqlens, conv_states!, state_indices?, has_initial_state?, silu) -> out
Tensors that an op does not produce (final_states without want_final, dbias without bias, ...)
are returned as empty tensors: custom ops cannot return None.

Backward workspace: allocated from torch's caching allocator (ccv1d_bwd_workspace_size bytes) and
passed in `workspace`, rather than NULL (the library's own stream-ordered pool). Reasons: the
memory is then visible to and bounded by torch (memory_allocated, set_per_process_memory_fraction,
empty_cache), it is reused across calls without a driver allocation, and under CUDA-graph capture
(torch.compile mode="reduce-overhead", torch.cuda.graph) it comes from the graph's private pool
like every other tensor in the graph.
"""
import os
from typing import Optional, Tuple

import torch

from ._alloc import states
from ._core import ConvArgs, run_bwd, run_fwd, run_update

Tensor = torch.Tensor
# CCV1D_TORCH_FALLBACK=1 forces the torch < 2.4 path (to test it on a newer torch).
HAVE_CUSTOM_OP = (hasattr(torch, "library") and hasattr(torch.library, "custom_op")
                  and not os.environ.get("CCV1D_TORCH_FALLBACK"))


def _slots(x, weight, cu_seqlens, num_state_slots):
    """(slots, dim, width-1) of the state tensors; no int() so that symbolic sizes stay symbolic
    in the fake kernels (torch.compile with dynamic shapes)."""
    nseq = x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    return (num_state_slots or nseq), x.shape[1], weight.shape[1] - 1


def _fwd_outputs(x, weight, cu_seqlens, num_state_slots, want_final):
    out = torch.empty_like(x)
    if want_final:
        final = states(x, *_slots(x, weight, cu_seqlens, num_state_slots), zero=True)
    else:
        final = x.new_empty(0)
    return out, final


def _fwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
              initial_states: Optional[Tensor], cu_seqlens: Optional[Tensor],
              state_indices: Optional[Tensor], has_initial_state: Optional[Tensor],
              num_state_slots: int, silu: bool, want_final: bool) -> Tuple[Tensor, Tensor]:
    out, final = _fwd_outputs(x, weight, cu_seqlens, num_state_slots, want_final)
    args = ConvArgs(x, weight, bias, seq_idx, initial_states, cu_seqlens, state_indices,
                    has_initial_state, num_state_slots, silu)
    run_fwd(args, out, final if want_final else None, fn="causal_conv1d_fn")
    return out, final


def _bwd_outputs(x, weight, bias, cu_seqlens, num_state_slots, want_dinitial):
    dx = torch.empty_like(x)
    dweight = torch.empty_like(weight)
    dbias = torch.empty_like(bias) if bias is not None else x.new_empty(0)
    if want_dinitial:
        # Zeros: slots no sequence maps to get no gradient and the library does not write them.
        dinit = states(x, *_slots(x, weight, cu_seqlens, num_state_slots), zero=True)
    else:
        dinit = x.new_empty(0)
    return dx, dweight, dbias, dinit


def _bwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
              initial_states: Optional[Tensor], cu_seqlens: Optional[Tensor],
              state_indices: Optional[Tensor], has_initial_state: Optional[Tensor],
              num_state_slots: int, silu: bool, dout: Tensor, dfinal_states: Optional[Tensor],
              want_dinitial: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    dx, dweight, dbias, dinit = _bwd_outputs(x, weight, bias, cu_seqlens, num_state_slots, want_dinitial)
    args = ConvArgs(x, weight, bias, seq_idx, initial_states, cu_seqlens, state_indices,
                    has_initial_state, num_state_slots, silu)
    run_bwd(args, dout, dx, dweight, dbias if bias is not None else None,
            dinit if want_dinitial else None, dfinal_states,
            alloc_workspace=lambda n: torch.empty(n, dtype=torch.uint8, device=x.device),
            fn="causal_conv1d_bwd")
    return dx, dweight, dbias, dinit


def _update_impl(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor], silu: bool,
                 cache_seqlens: Optional[Tensor], conv_state_indices: Optional[Tensor]) -> Tensor:
    out = torch.empty_like(x)
    run_update(x, conv_state, weight, out, bias, silu, cache_seqlens, conv_state_indices,
               fn="causal_conv1d_update")
    return out


def _varlen_states_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], cu_seqlens: Tensor,
                        conv_states: Tensor, state_indices: Optional[Tensor],
                        has_initial_state: Optional[Tensor], silu: bool) -> Tensor:
    out = torch.empty_like(x)
    args = ConvArgs(x, weight, bias, None, conv_states, cu_seqlens, state_indices, has_initial_state,
                    conv_states.shape[0], silu)
    run_fwd(args, out, conv_states, fn="causal_conv1d_varlen_fn")
    return out


def _grads(ctx, dout, dfinal):
    x, weight, bias, seq_idx, init, cu, si, hi = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(x)
    if not ctx.want_final or (dfinal is not None and dfinal.numel() == 0):
        dfinal = None
    want_dinit = init is not None and ctx.needs_input_grad[4]
    dx, dweight, dbias, dinit = bwd_op(x, weight, bias, seq_idx, init, cu, si, hi, ctx.num_state_slots,
                                       ctx.silu, dout, dfinal, want_dinit)
    return (dx, dweight, dbias if bias is not None else None, None, dinit if want_dinit else None,
            None, None, None, None, None, None)


def _save(ctx, inputs):
    x, weight, bias, seq_idx, init, cu, si, hi, slots, silu, want_final = inputs
    ctx.save_for_backward(x, weight, bias, seq_idx, init, cu, si, hi)
    ctx.num_state_slots, ctx.silu, ctx.want_final = slots, silu, want_final


if HAVE_CUSTOM_OP:
    fwd_op = torch.library.custom_op("ccv1d::fwd", _fwd_impl, mutates_args=())
    bwd_op = torch.library.custom_op("ccv1d::bwd", _bwd_impl, mutates_args=())
    update_op = torch.library.custom_op("ccv1d::update", _update_impl, mutates_args=("conv_state",))
    varlen_states_op = torch.library.custom_op("ccv1d::varlen_fwd_states", _varlen_states_impl,
                                               mutates_args=("conv_states",))

    @fwd_op.register_fake
    def _(x, weight, bias, seq_idx, initial_states, cu_seqlens, state_indices, has_initial_state,
          num_state_slots, silu, want_final):
        return _fwd_outputs(x, weight, cu_seqlens, num_state_slots, want_final)

    @bwd_op.register_fake
    def _(x, weight, bias, seq_idx, initial_states, cu_seqlens, state_indices, has_initial_state,
          num_state_slots, silu, dout, dfinal_states, want_dinitial):
        return _bwd_outputs(x, weight, bias, cu_seqlens, num_state_slots, want_dinitial)

    @update_op.register_fake
    def _(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices):
        return torch.empty_like(x)

    @varlen_states_op.register_fake
    def _(x, weight, bias, cu_seqlens, conv_states, state_indices, has_initial_state, silu):
        return torch.empty_like(x)

    def _setup_context(ctx, inputs, output):
        _save(ctx, inputs)

    def _backward(ctx, dout, dfinal):
        return _grads(ctx, dout, dfinal)

    fwd_op.register_autograd(_backward, setup_context=_setup_context)

    def fwd(*args):
        return fwd_op(*args)
else:  # torch < 2.4: eager autograd only (torch.compile will graph-break on these calls)
    bwd_op, update_op, varlen_states_op = _bwd_impl, _update_impl, _varlen_states_impl

    class _Fwd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            _save(ctx, inputs)
            out, final = _fwd_impl(*inputs)
            if not inputs[-1]:
                ctx.mark_non_differentiable(final)
            return out, final

        @staticmethod
        def backward(ctx, dout, dfinal):
            return _grads(ctx, dout, dfinal)

    def fwd(*args):
        return _Fwd.apply(*args)
