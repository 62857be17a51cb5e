"""Driver layer inside a PyTorch process: the library's helpers on PyTorch tensors and streams,
with PyTorch's (primary) context current, under CUDA graph capture, and from a thread that never
touched CUDA. Needs a libcausal_conv1d.so built with a CUDA image (any build with cfg ccv1d_cuda).

    python3 tests/gpu/smoke/torch_smoke.py path/to/libcausal_conv1d.so

Prints PASS/FAIL lines; exit status 1 when anything failed.
"""
import ctypes
import sys
import threading

import torch

lib = ctypes.CDLL(sys.argv[1])
lib.ccv1d_last_error.restype = ctypes.c_char_p
lib.ccv1d_memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
lib.ccv1d_synchronize.argtypes = [ctypes.c_void_p]
lib.ccv1d_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
lib.ccv1d_free.argtypes = [ctypes.c_void_p]
failed = 0


def check(name, ok, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + name + (": " + str(detail) if detail else ""), flush=True)
    failed += 0 if ok else 1


def call(name, status):
    msg = lib.ccv1d_last_error().decode()
    check(name, status == 0, f"status {status} {msg}")
    return status == 0


print("INFO backends compiled:", hex(lib.ccv1d_backends_compiled()), "torch", torch.__version__)
n = ctypes.c_int(-1)
call("device_count", lib.ccv1d_device_count(ctypes.byref(n)))
check("device_count matches torch", n.value == torch.cuda.device_count(), f"{n.value} vs {torch.cuda.device_count()}")

N = 1 << 22
x = torch.randn(N, device="cuda")
y = torch.full_like(x, float("nan"))
nbytes = N * 4

# PyTorch's default stream (legacy, handle 0) with PyTorch's context current.
call("memcpy d2d default stream", lib.ccv1d_memcpy(y.data_ptr(), x.data_ptr(), nbytes, None))
call("synchronize(NULL)", lib.ccv1d_synchronize(None))
check("d2d result", torch.equal(x, y))

# A PyTorch side stream: ordered after work queued there, before work queued after.
s = torch.cuda.Stream()
y.fill_(float("nan"))
with torch.cuda.stream(s):
    z = x * 2  # queued on s
    call("memcpy on torch stream", lib.ccv1d_memcpy(y.data_ptr(), z.data_ptr(), nbytes, ctypes.c_void_p(s.cuda_stream)))
    w = y + 1  # queued on s after the copy
call("synchronize(torch stream)", lib.ccv1d_synchronize(ctypes.c_void_p(s.cuda_stream)))
check("stream ordering", torch.equal(w, x * 2 + 1))

# Host <-> device through pageable host memory.
h = torch.empty(N, dtype=torch.float32)
call("memcpy d2h", lib.ccv1d_memcpy(h.data_ptr(), x.data_ptr(), nbytes, None))
call("synchronize", lib.ccv1d_synchronize(None))
check("d2h result", torch.equal(h, x.cpu()))

# Graph capture: the library's call must be capturable (no sync, no sync alloc) and replay.
g = torch.cuda.CUDAGraph()
y.fill_(0)
torch.cuda.synchronize()
cap = torch.cuda.Stream()
with torch.cuda.graph(g, stream=cap):
    st = lib.ccv1d_memcpy(y.data_ptr(), x.data_ptr(), nbytes, ctypes.c_void_p(cap.cuda_stream))
check("memcpy under capture", st == 0, lib.ccv1d_last_error().decode())
x.copy_(torch.arange(N, device="cuda", dtype=torch.float32))
g.replay()
torch.cuda.synchronize()
check("graph replay", torch.equal(y, x))

# A thread that never touched CUDA: no current context there; the library pushes the primary
# context for the call and pops it.
res = {}


def worker():
    p = ctypes.c_void_p()
    res["malloc"] = lib.ccv1d_malloc(ctypes.byref(p), 1 << 20)
    res["memcpy"] = lib.ccv1d_memcpy(p, ctypes.c_void_p(x.data_ptr()), 1 << 20, None)
    res["sync"] = lib.ccv1d_synchronize(None)
    back = torch.empty(1 << 18, dtype=torch.float32)
    res["d2h"] = lib.ccv1d_memcpy(ctypes.c_void_p(back.data_ptr()), p, 1 << 20, None)
    res["sync2"] = lib.ccv1d_synchronize(None)
    res["ok"] = torch.equal(back, x[: 1 << 18].cpu())
    res["free"] = lib.ccv1d_free(p)
    res["err"] = lib.ccv1d_last_error().decode()


t = threading.Thread(target=worker)
t.start()
t.join()
check("fresh thread helpers", all(res[k] == 0 for k in ["malloc", "memcpy", "sync", "d2h", "sync2", "free"]) and res["ok"], res)

# PyTorch is undisturbed.
a = torch.randn(1000, device="cuda")
check("torch still fine", torch.allclose(a * 2, a + a) and torch.cuda.current_device() == 0)

print("RESULT", "PASS" if failed == 0 else f"FAIL ({failed} failed)")
sys.exit(1 if failed else 0)
