#!/usr/bin/env python3
"""libcausal_conv1d on PyTorch CUDA tensors through ctypes — no extension compiled against torch.

Runs forward and backward on torch tensors (channel-first and channel-last views, f32 and bf16,
SiLU on and off) on torch's current stream and on a side stream, and compares with
torch.nn.functional.conv1d in float64 (outputs, and gradients from autograd).
Usage: python3 examples-c/torch_ctypes.py [path/to/libcausal_conv1d.so]   (or CAUSAL_CONV1D_LIB)
"""
import ctypes as C
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctypes_demo import BwdParams, FwdParams, Tensor, call, load  # noqa: E402

DTYPES = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}
BACKEND_GPU = 2


def view(t):
    """ccv1d_tensor of a torch tensor (strides in elements, as torch gives them)."""
    st = list(t.stride()) + [0] * (3 - t.dim())
    return Tensor(C.c_void_p(t.data_ptr()), DTYPES[t.dtype], (C.c_int64 * 3)(*st))


def reference(x, w, b, dout, silu):
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    L = x.shape[-1]
    z = F.conv1d(xd, wd.unsqueeze(1), bd, padding=w.shape[1] - 1, groups=x.shape[1])[..., :L]
    out = F.silu(z) if silu else z
    out.backward(dout.double())
    return out.detach(), xd.grad, wd.grad, bd.grad


def run_case(lib, B, D, L, W, dtype, channel_last, silu, stream):
    dev = "cuda"
    if channel_last:
        x = torch.randn(B, L, D, device=dev, dtype=dtype).transpose(1, 2)
        dout = torch.randn(B, L, D, device=dev, dtype=dtype).transpose(1, 2)
    else:
        x = torch.randn(B, D, L, device=dev, dtype=dtype)
        dout = torch.randn(B, D, L, device=dev, dtype=dtype)
    w = torch.randn(D, W, device=dev, dtype=torch.float32) * 0.5
    b = torch.randn(D, device=dev, dtype=torch.float32)
    out = torch.full_like(x, float("nan"))  # empty_like keeps x's strides
    dx = torch.full_like(x, float("nan"))
    dw = torch.full_like(w, float("nan"))
    db = torch.full_like(b, float("nan"))
    common = dict(backend=BACKEND_GPU, activation=int(silu), batch=B, dim=D, seqlen=L, width=W)
    f = FwdParams(struct_size=C.sizeof(FwdParams), x=view(x), weight=view(w), bias=view(b), out=view(out), **common)
    g = BwdParams(struct_size=C.sizeof(BwdParams), x=view(x), weight=view(w), bias=view(b), dout=view(dout),
                  dx=view(dx), dweight=view(dw), dbias=view(db), **common)
    with torch.cuda.stream(stream):
        h = C.c_void_p(torch.cuda.current_stream().cuda_stream)
        for fn, p in (("ccv1d_fwd", f), ("ccv1d_bwd", g)):
            status = getattr(lib, fn)(C.byref(p), h)
            if status:
                raise RuntimeError(f"{fn}: {lib.ccv1d_status_string(status).decode()}: {lib.ccv1d_last_error().decode()}")
    torch.cuda.synchronize()
    ref = reference(x, w, b, dout, silu)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}[dtype]
    errs = []
    for got, want in zip((out, dx, dw, db), ref):
        rel = ((got.double() - want).norm() / want.norm()).item()  # NaN (unwritten) fails too
        errs.append(rel)
    ok = all(e <= tol for e in errs)
    name = f"{B}x{D}x{L} w{W} {str(dtype)[6:]} {'cl' if channel_last else 'cf'} {'silu' if silu else 'none'}"
    print(f"{name:36s} rel err out {errs[0]:.1e} dx {errs[1]:.1e} dw {errs[2]:.1e} db {errs[3]:.1e} tol {tol:.0e}: "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def main():
    lib = load(sys.argv[1] if len(sys.argv) > 1 else None)
    lib.ccv1d_fwd.argtypes = [C.POINTER(FwdParams), C.c_void_p]
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    ok = True
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for channel_last in (False, True):
            for silu in (False, True):
                for (B, D, L, W), stream in (((2, 64, 300, 4), torch.cuda.current_stream()), ((3, 40, 77, 3), side)):
                    ok &= run_case(lib, B, D, L, W, dtype, channel_last, silu, stream)
    print("RESULT", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
