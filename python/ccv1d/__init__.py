"""ccv1d: Python bindings (ctypes, no compiled code) for libcausal_conv1d.

Drop-in for Dao-AILab causal-conv1d: `from ccv1d import causal_conv1d_fn, causal_conv1d_update`.
Works on numpy arrays and torch CPU tensors (the library's CPU backend) and torch CUDA tensors
(its GPU backend); torch and numpy are both optional. The library is found through
$CAUSAL_CONV1D_LIB, then a libcausal_conv1d.so* next to this file, then the system loader.
"""
from ._api import causal_conv1d_bwd, causal_conv1d_fn, causal_conv1d_update, causal_conv1d_varlen_fn
from ._lib import (STATUS, STATUS_NAME, Ccv1dActivationError, Ccv1dError, LibraryNotFoundError,
                   backends_compiled, lib, status_string, version)

__version__ = "0.1.0"
__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "causal_conv1d_varlen_fn", "causal_conv1d_bwd",
           "Ccv1dError", "Ccv1dActivationError", "LibraryNotFoundError", "STATUS", "STATUS_NAME",
           "lib", "version", "backends_compiled", "status_string"]
