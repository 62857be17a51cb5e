#!/usr/bin/env python3
"""libcausal_conv1d on PyTorch CUDA tensors through ctypes — no extension compiled against torch.

Runs forward and backward on torch tensors (channel-first and channel-last views, f32 and bf16,
SiLU on and off) on torch's current stream and on a side stream, and compares with
torch.nn.functional.conv1d in float64 (outputs, and gradients from autograd). Then captures a
forward + backward in a CUDA graph (torch.cuda.graph) and checks three replays on fresh inputs.
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


def check(name, got_all, ref, tol):
    errs = [((got.double() - want).norm() / want.norm()).item() for got, want in zip(got_all, ref)]
    ok = all(e <= tol for e in errs)  # NaN (unwritten output) fails too
    print(f"{name:36s} rel err out {errs[0]:.1e} dx {errs[1]:.1e} dw {errs[2]:.1e} db {errs[3]:.1e} tol {tol:.1e}: "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def make_params(x, w, b, dout, out, dx, dw, db, silu):
    B, D, L = x.shape
    common = dict(backend=BACKEND_GPU, activation=int(silu), batch=B, dim=D, seqlen=L, width=w.shape[1])
    f = FwdParams(struct_size=C.sizeof(FwdParams), x=view(x), weight=view(w), bias=view(b), out=view(out), **common)
    g = BwdParams(struct_size=C.sizeof(BwdParams), x=view(x), weight=view(w), bias=view(b), dout=view(dout),
                  dx=view(dx), dweight=view(dw), dbias=view(db), **common)
    return f, g


def launch(lib, f, g):
    h = C.c_void_p(torch.cuda.current_stream().cuda_stream)
    for fn, p in (("ccv1d_fwd", f), ("ccv1d_bwd", g)):
        status = getattr(lib, fn)(C.byref(p), h)
        if status:
            raise RuntimeError(f"{fn}: {lib.ccv1d_status_string(status).decode()}: {lib.ccv1d_last_error().decode()}")


def graph_case(lib):
    """Capture fwd + bwd (pooled workspace: a stream-ordered allocation inside the capture) in a CUDA
    graph on torch's side stream, then replay it on fresh inputs copied into the static tensors."""
    B, D, L, W, dtype = 2, 96, 1000, 4, torch.bfloat16
    x = torch.randn(B, L, D, device="cuda", dtype=dtype).transpose(1, 2)
    dout = torch.randn_like(x)
    w = torch.randn(D, W, device="cuda") * 0.5
    b = torch.randn(D, device="cuda")
    out, dx, dw, db = torch.empty_like(x), torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
    f, g = make_params(x, w, b, dout, out, dx, dw, db, True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        launch(lib, f, g)  # warm-up outside the capture (module load, pool creation)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch(lib, f, g)
    ok = True
    for rep in range(3):
        x.copy_(torch.randn(B, L, D, device="cuda", dtype=dtype).transpose(1, 2))
        dout.copy_(torch.randn(B, L, D, device="cuda", dtype=dtype).transpose(1, 2))
        for t in (out, dx, dw, db):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ok &= check(f"graph replay {rep} {B}x{D}x{L} bf16 cl silu", (out, dx, dw, db), reference(x, w, b, dout, True), TOL[dtype])
    return ok


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
    f, g = make_params(x, w, b, dout, out, dx, dw, db, silu)
    stream.wait_stream(torch.cuda.current_stream())  # the inputs were made on the current stream
    with torch.cuda.stream(stream):
        launch(lib, f, g)
    torch.cuda.synchronize()
    name = f"{B}x{D}x{L} w{W} {str(dtype)[6:]} {'cl' if channel_last else 'cf'} {'silu' if silu else 'none'}"
    return check(name, (out, dx, dw, db), reference(x, w, b, dout, silu), TOL[dtype])


def main():
    lib = load(sys.argv[1] if len(sys.argv) > 1 else None)
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    ok = True
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for channel_last in (False, True):
            for silu in (False, True):
                for (B, D, L, W), stream in (((2, 64, 300, 4), torch.cuda.current_stream()), ((3, 40, 77, 3), side)):
                    ok &= run_case(lib, B, D, L, W, dtype, channel_last, silu, stream)
    ok &= graph_case(lib)
    print("RESULT", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
