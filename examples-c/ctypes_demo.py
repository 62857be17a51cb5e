#!/usr/bin/env python3
"""Load libcausal_conv1d.so with ctypes, run forward and backward on the CPU backend, and compare
with a reference written here (numpy when installed, plain Python otherwise).

Usage: python3 examples-c/ctypes_demo.py [path/to/libcausal_conv1d.so]   (or CAUSAL_CONV1D_LIB=...)
"""
import ctypes as C
import math
import os
import random
import sys

try:
    import numpy as np
except ImportError:  # the pure-Python path checks the same things, just slower
    np = None

F32, I32 = 1, 4
BACKEND_CPU, ACT_SILU = 1, 1


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int32), ("stride", C.c_int64 * 3)]


_COMMON = [("struct_size", C.c_uint32), ("backend", C.c_int32), ("activation", C.c_int32),
           ("batch", C.c_int64), ("dim", C.c_int64), ("seqlen", C.c_int64), ("width", C.c_int64)]


class FwdParams(C.Structure):
    _fields_ = _COMMON + [(n, Tensor) for n in (
        "x", "weight", "bias", "out", "seq_idx", "initial_states", "final_states", "cu_seqlens",
        "state_indices", "has_initial_state")] + [("num_seqs", C.c_int64), ("num_state_slots", C.c_int64)]


class BwdParams(C.Structure):
    _fields_ = _COMMON + [(n, Tensor) for n in (
        "x", "weight", "bias", "seq_idx", "initial_states", "cu_seqlens", "state_indices",
        "has_initial_state")] + [("num_seqs", C.c_int64), ("num_state_slots", C.c_int64)] + [
        (n, Tensor) for n in ("dout", "dfinal_states", "dx", "dweight", "dbias", "dinitial_states")] + [
        ("workspace", C.c_void_p), ("workspace_size", C.c_size_t), ("nondeterministic", C.c_int32)]


def load(path=None):
    path = path or os.environ.get("CAUSAL_CONV1D_LIB") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "libcausal_conv1d.so")
    lib = C.CDLL(path)
    for fn, argt in (("ccv1d_fwd", FwdParams), ("ccv1d_bwd", BwdParams)):
        getattr(lib, fn).argtypes = [C.POINTER(argt), C.c_void_p]
        getattr(lib, fn).restype = C.c_int32
    lib.ccv1d_last_error.restype = C.c_char_p
    lib.ccv1d_status_string.restype = C.c_char_p
    lib.ccv1d_status_string.argtypes = [C.c_int32]
    lib.ccv1d_version.restype = C.c_char_p
    return lib


def call(lib, fn, params):
    status = getattr(lib, fn)(C.byref(params), None)
    if status != 0:
        raise RuntimeError(f"{fn}: {lib.ccv1d_status_string(status).decode()}: {lib.ccv1d_last_error().decode()}")


def buf(values):
    return (C.c_float * len(values))(*values)


def view(arr, *strides):
    return Tensor(C.cast(arr, C.c_void_p), F32, (C.c_int64 * 3)(*(list(strides) + [0] * (3 - len(strides)))))


def reference(x, w, bias, dout, B, D, L, W):
    """Channel-first [B, D, L], SiLU: returns out, dx, dweight, dbias as flat lists (float64)."""
    if np is not None:
        xa = np.array(x, dtype=np.float64).reshape(B, D, L)
        wa = np.array(w, dtype=np.float64).reshape(D, W)
        ga = np.array(dout, dtype=np.float64).reshape(B, D, L)
        xp = np.concatenate([np.zeros((B, D, W - 1)), xa], axis=2)
        z = np.array(bias, dtype=np.float64)[None, :, None] + sum(wa[None, :, k, None] * xp[:, :, k:k + L] for k in range(W))
        s = 1 / (1 + np.exp(-z))
        g = ga * s * (1 + z * (1 - s))
        gp = np.concatenate([g, np.zeros((B, D, W - 1))], axis=2)
        dx = sum(wa[None, :, k, None] * gp[:, :, W - 1 - k:W - 1 - k + L] for k in range(W))
        dw = np.stack([(g * xp[:, :, k:k + L]).sum(axis=(0, 2)) for k in range(W)], axis=1)
        return (z * s).ravel().tolist(), dx.ravel().tolist(), dw.ravel().tolist(), g.sum(axis=(0, 2)).tolist()
    out, dx, dw, db = [0.0] * (B * D * L), [0.0] * (B * D * L), [0.0] * (D * W), [0.0] * D
    xe = lambda b, d, t: x[(b * D + d) * L + t] if t >= 0 else 0.0
    g = [0.0] * (B * D * L)
    for b in range(B):
        for d in range(D):
            for t in range(L):
                z = bias[d] + sum(w[d * W + k] * xe(b, d, t - W + 1 + k) for k in range(W))
                s = 1 / (1 + math.exp(-z))
                i = (b * D + d) * L + t
                out[i] = z * s
                g[i] = dout[i] * s * (1 + z * (1 - s))
                db[d] += g[i]
                for k in range(W):
                    dw[d * W + k] += g[i] * xe(b, d, t - W + 1 + k)
            for t in range(L):
                dx[(b * D + d) * L + t] = sum(w[d * W + k] * g[(b * D + d) * L + t + W - 1 - k]
                                              for k in range(W) if t + W - 1 - k < L)
    return out, dx, dw, db


def main():
    lib = load(sys.argv[1] if len(sys.argv) > 1 else None)
    B, D, L, W = 2, 8, 33, 4
    rnd = random.Random(3)
    r = lambda n: [rnd.uniform(-1, 1) for _ in range(n)]
    x, w, bias, dout = r(B * D * L), r(D * W), r(D), r(B * D * L)
    # Round the inputs through float32 so the reference sees exactly what the library sees.
    x, w, bias, dout = (list(buf(v)) for v in (x, w, bias, dout))
    cx, cw, cb, cg = buf(x), buf(w), buf(bias), buf(dout)
    nan = [float("nan")]
    out, dx, dw, db = buf(nan * (B * D * L)), buf(nan * (B * D * L)), buf(nan * (D * W)), buf(nan * D)
    common = dict(backend=BACKEND_CPU, activation=ACT_SILU, batch=B, dim=D, seqlen=L, width=W)

    f = FwdParams(struct_size=C.sizeof(FwdParams), x=view(cx, D * L, L, 1), weight=view(cw, W, 1),
                  bias=view(cb, 1), out=view(out, D * L, L, 1), **common)
    call(lib, "ccv1d_fwd", f)
    g = BwdParams(struct_size=C.sizeof(BwdParams), x=f.x, weight=f.weight, bias=f.bias,
                  dout=view(cg, D * L, L, 1), dx=view(dx, D * L, L, 1), dweight=view(dw, W, 1),
                  dbias=view(db, 1), **common)
    call(lib, "ccv1d_bwd", g)

    ref = reference(x, w, bias, dout, B, D, L, W)
    errs = [max(abs(a - b) for a, b in zip(got, want)) for got, want in zip((out, dx, dw, db), ref)]
    ok = all(e < 1e-4 for e in errs)  # NaN poison fails this comparison too
    print(f"libcausal_conv1d {lib.ccv1d_version().decode()} via ctypes ({'numpy' if np else 'pure Python'} reference): "
          f"max|err| out {errs[0]:.2e} dx {errs[1]:.2e} dweight {errs[2]:.2e} dbias {errs[3]:.2e}: {'PASS' if ok else 'FAIL'}")
    f.width = 0
    try:
        call(lib, "ccv1d_fwd", f)
        ok = False
    except RuntimeError as e:
        print(f"width=0 -> {e}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
