"""The C ABI of libcausal_conv1d through ctypes: constants, struct mirrors, loading, errors.

Mirrors src/params.rs and src/error.rs (include/causal_conv1d.h is generated from them);
tests/test_structs.py compiles a C program against the header and compares every offset.
"""
import ctypes as C
import ctypes.util
import glob
import os
import threading

# Dtype codes (CCV1D_DTYPE_*).
DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_I32, DTYPE_BOOL = 1, 2, 3, 4, 5
ACT_NONE, ACT_SILU = 0, 1
BACKEND_AUTO, BACKEND_CPU, BACKEND_GPU = 0, 1, 2
HAVE_CPU, HAVE_CUDA, HAVE_ROCM = 1, 2, 4

# Status codes (CCV1D_OK, CCV1D_ERR_*): stable numbers, part of the ABI.
STATUS = {
    "OK": 0, "NULL_POINTER": 1, "STRUCT_SIZE": 2, "DTYPE": 3, "ACTIVATION": 4, "BACKEND": 5,
    "WIDTH": 6, "DIM": 7, "OVERFLOW": 8, "SHAPE": 9, "CU_SEQLENS": 10, "OVERLAP": 11, "INDEX": 12,
    "WORKSPACE": 13, "NO_DEVICE": 20, "WRONG_DEVICE": 21, "DEVICE": 22, "OUT_OF_MEMORY": 23,
    "INTERNAL": 99,
}
STATUS_NAME = {v: k for k, v in STATUS.items()}
globals().update({("OK" if k == "OK" else "ERR_" + k): v for k, v in STATUS.items()})


class ccv1d_tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int32), ("stride", C.c_int64 * 3)]


_COMMON = [("struct_size", C.c_uint32), ("backend", C.c_int32), ("activation", C.c_int32),
           ("batch", C.c_int64), ("dim", C.c_int64), ("seqlen", C.c_int64), ("width", C.c_int64)]
_POOL = [("num_seqs", C.c_int64), ("num_state_slots", C.c_int64)]


def _tensors(*names):
    return [(n, ccv1d_tensor) for n in names]


class ccv1d_fwd_params(C.Structure):
    _fields_ = _COMMON + _tensors(
        "x", "weight", "bias", "out", "seq_idx", "initial_states", "final_states", "cu_seqlens",
        "state_indices", "has_initial_state") + _POOL


class ccv1d_bwd_params(C.Structure):
    _fields_ = _COMMON + _tensors(
        "x", "weight", "bias", "seq_idx", "initial_states", "cu_seqlens", "state_indices",
        "has_initial_state") + _POOL + _tensors(
        "dout", "dfinal_states", "dx", "dweight", "dbias", "dinitial_states") + [
        ("workspace", C.c_void_p), ("workspace_size", C.c_size_t), ("nondeterministic", C.c_int32)]


class ccv1d_update_params(C.Structure):
    _fields_ = _COMMON + [("state_len", C.c_int64), ("num_state_slots", C.c_int64)] + _tensors(
        "x", "weight", "bias", "out", "conv_state", "cache_seqlens", "conv_state_indices")


STRUCTS = (ccv1d_tensor, ccv1d_fwd_params, ccv1d_bwd_params, ccv1d_update_params)


def new_params(cls, **fields):
    """A zeroed params struct with struct_size set (absent tensors stay NULL)."""
    p = cls(**fields)
    p.struct_size = C.sizeof(cls)
    return p


class Ccv1dError(RuntimeError):
    """A status other than OK from the library (or the same check done in Python before a call).

    Attributes: ``status`` (the number), ``status_name`` ("SHAPE", ...), ``function`` (the C or
    Python entry point), ``message`` (``ccv1d_last_error()``, naming the offending field).
    """

    def __init__(self, status, message, function=""):
        self.status = int(status)
        self.status_name = STATUS_NAME.get(self.status, "UNKNOWN_STATUS")
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{self.status_name} ({self.status}): {message}")


class Ccv1dActivationError(Ccv1dError, NotImplementedError):
    """Unknown activation string (also a NotImplementedError, as Dao-AILab's interface raises)."""


class LibraryNotFoundError(OSError):
    """libcausal_conv1d could not be loaded; the message lists every place that was tried."""


ENV_VAR = "CAUSAL_CONV1D_LIB"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None


def _candidates():
    """(description, path-or-name) in search order."""
    env = os.environ.get(ENV_VAR)
    if env:
        # An explicit setting is the only candidate: silently loading another copy would hide
        # a wrong path.
        return [(f"${ENV_VAR}", env)]
    found = []
    for pattern in ("libcausal_conv1d.so", "libcausal_conv1d.so.*"):
        for p in sorted(glob.glob(os.path.join(_PACKAGE_DIR, pattern))):
            found.append(("next to the package", p))
    if not found:
        found.append(("next to the package", os.path.join(_PACKAGE_DIR, "libcausal_conv1d.so*")))
    name = ctypes.util.find_library("causal_conv1d")
    if name:
        found.append(("ctypes.util.find_library", name))
    for soname in ("libcausal_conv1d.so.0", "libcausal_conv1d.so"):
        found.append(("the system loader (LD_LIBRARY_PATH, ld.so.cache)", soname))
    return found


def _declare(lib):
    sig = {
        "ccv1d_fwd": ([C.POINTER(ccv1d_fwd_params), C.c_void_p], C.c_int32),
        "ccv1d_bwd": ([C.POINTER(ccv1d_bwd_params), C.c_void_p], C.c_int32),
        "ccv1d_bwd_workspace_size": ([C.POINTER(ccv1d_bwd_params), C.POINTER(C.c_size_t)], C.c_int32),
        "ccv1d_update": ([C.POINTER(ccv1d_update_params), C.c_void_p], C.c_int32),
        "ccv1d_last_error": ([], C.c_char_p),
        "ccv1d_status_string": ([C.c_int32], C.c_char_p),
        "ccv1d_version": ([], C.c_char_p),
        "ccv1d_backends_compiled": ([], C.c_uint32),
        "ccv1d_device_count": ([C.POINTER(C.c_int)], C.c_int32),
    }
    for name, (args, res) in sig.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    return lib


def lib():
    """The loaded library (loaded once, on first use). Raises LibraryNotFoundError."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                tried = []
                for how, path in _candidates():
                    if "*" in path:
                        tried.append(f"  {path} ({how}): no such file")
                        continue
                    try:
                        _lib = _declare(C.CDLL(path))
                        break
                    except (OSError, AttributeError) as e:
                        tried.append(f"  {path} ({how}): {e}")
                if _lib is None:
                    raise LibraryNotFoundError(
                        "cannot load libcausal_conv1d. Set CAUSAL_CONV1D_LIB to the path of "
                        "libcausal_conv1d.so, or copy the .so next to the ccv1d package "
                        f"({_PACKAGE_DIR}). Tried:\n" + "\n".join(tried))
    return _lib


def library_path():
    """The file the loaded library came from (via dladdr-free lookup: the name ctypes used)."""
    return lib()._name


def call(fname, params, stream=None):
    """Call ccv1d_fwd/bwd/update with a params struct; raise Ccv1dError on a non-OK status."""
    L = lib()
    status = getattr(L, fname)(C.byref(params), stream)
    if status != 0:
        raise Ccv1dError(status, L.ccv1d_last_error().decode("utf-8", "replace"), fname)


def bwd_workspace_size(params):
    L = lib()
    n = C.c_size_t(0)
    status = L.ccv1d_bwd_workspace_size(C.byref(params), C.byref(n))
    if status != 0:
        raise Ccv1dError(status, L.ccv1d_last_error().decode("utf-8", "replace"), "ccv1d_bwd_workspace_size")
    return n.value


def version():
    return lib().ccv1d_version().decode()


def backends_compiled():
    """Set of backend names compiled into the loaded library ({"cpu", "cuda", "rocm"})."""
    bits = lib().ccv1d_backends_compiled()
    return {n for n, b in (("cpu", HAVE_CPU), ("cuda", HAVE_CUDA), ("rocm", HAVE_ROCM)) if bits & b}


def status_string(status):
    return lib().ccv1d_status_string(status).decode()
