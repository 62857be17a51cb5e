"""numpy arrays and torch tensors as `ccv1d_tensor` views, with the checks only Python can do.

The library validates dtypes, strides, index contents and overlaps itself, and names the field
in its message. What it cannot see is a tensor's *shape* (the params carry one set of dims) or
which device a pointer lives on before it dereferences it on the CPU, so those two checks are
done here and raised as the same Ccv1dError (SHAPE / WRONG_DEVICE). A dtype the library has no
code for (float64, int64, ...) is passed as code 0, so the library's DTYPE message names it.
"""
import ctypes as C

from ._lib import (BACKEND_CPU, BACKEND_GPU, DTYPE_BF16, DTYPE_BOOL, DTYPE_F16, DTYPE_F32,
                   DTYPE_I32, ERR_DTYPE, ERR_SHAPE, ERR_WRONG_DEVICE, Ccv1dError, call,
                   ccv1d_tensor)

_NUMPY_CODES = {"float32": DTYPE_F32, "float16": DTYPE_F16, "bfloat16": DTYPE_BF16,
                "int32": DTYPE_I32, "bool": DTYPE_BOOL}
_TORCH_CODES = {"torch.float32": DTYPE_F32, "torch.float16": DTYPE_F16, "torch.bfloat16": DTYPE_BF16,
                "torch.int32": DTYPE_I32, "torch.bool": DTYPE_BOOL}


def is_torch(a):
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def is_numpy(a):
    return type(a).__module__ == "numpy" and hasattr(a, "__array_interface__")


def device_of(a):
    """'cpu' for numpy arrays and CPU tensors, else str(tensor.device) ('cuda:0')."""
    if is_torch(a):
        return "cpu" if a.device.type == "cpu" else str(a.device)
    return "cpu"


class Described:
    """A view plus what the checks need: shape, device, and the owning object (kept alive)."""

    __slots__ = ("view", "shape", "device", "obj")

    def __init__(self, view, shape, device, obj):
        self.view, self.shape, self.device, self.obj = view, shape, device, obj


def describe(a, name, fn):
    """ccv1d_tensor of `a` (numpy ndarray or torch tensor); strides in elements."""
    if is_torch(a):
        code = _TORCH_CODES.get(str(a.dtype), 0)
        strides = list(a.stride())
        ptr = a.data_ptr()
        shape = tuple(a.shape)
    elif is_numpy(a):
        code = _NUMPY_CODES.get(a.dtype.name, 0)
        item = a.dtype.itemsize
        if any(s % item for s in a.strides):
            raise Ccv1dError(ERR_SHAPE, f"{name}: strides {a.strides} (bytes) are not multiples of "
                                        f"the element size {item}", fn)
        if not a.flags.aligned:
            raise Ccv1dError(ERR_SHAPE, f"{name}: array is not aligned to its element size", fn)
        strides = [s // item for s in a.strides]
        ptr = a.__array_interface__["data"][0]
        shape = tuple(a.shape)
    else:
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray or a torch.Tensor, got {type(a).__name__}")
    if len(strides) > 3:
        raise Ccv1dError(ERR_SHAPE, f"{name}: {len(strides)} dims, at most 3 expected", fn)
    st = (C.c_int64 * 3)(*(strides + [0] * (3 - len(strides))))
    # A zero-element tensor may have a NULL data pointer; the library reads nothing from it but
    # NULL means "absent", so point it at a dummy address instead.
    if ptr == 0 and _numel(shape) == 0:
        ptr = C.addressof(_DUMMY)
    return Described(ccv1d_tensor(C.c_void_p(ptr), code, st), shape, device_of(a), a)


_DUMMY = (C.c_int64 * 2)()


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Binder:
    """Collects the views of one call, checking each shape and that all live on one device."""

    def __init__(self, fn, device):
        self.fn = fn
        self.device = device
        self.keep = []  # the described objects, alive until the call returns
        self.unknown = []  # "name is float64": dtypes passed as code 0 (no library dtype)

    def bind(self, a, name, shape, optional=True):
        """ccv1d_tensor for `a` with the expected `shape` (a tuple; None = absent view)."""
        if a is None:
            if not optional:
                raise Ccv1dError(ERR_SHAPE, f"{name} is required", self.fn)
            return ccv1d_tensor()
        d = describe(a, name, self.fn)
        if d.device != self.device:
            raise Ccv1dError(ERR_WRONG_DEVICE, f"{name} is on {d.device} but x is on {self.device}", self.fn)
        if tuple(d.shape) != tuple(shape):
            raise Ccv1dError(ERR_SHAPE, f"{name} has shape {tuple(d.shape)}, expected {tuple(shape)}", self.fn)
        self.keep.append(d.obj)
        if d.view.dtype == 0:
            self.unknown.append(f"{name} is {str(a.dtype).replace('torch.', '')}")
        return d.view

    def call(self, fname, params, stream):
        """ccv1d_* call; a DTYPE error also says which Python dtypes had no library code."""
        try:
            call(fname, params, stream)
        except Ccv1dError as e:
            if e.status == ERR_DTYPE and self.unknown:
                raise Ccv1dError(e.status, f"{e.message} [{', '.join(self.unknown)}: supported are "
                                 "float32/float16/bfloat16, int32 (and bool for has_initial_state)]",
                                 e.function) from None
            raise

    def backend(self):
        return BACKEND_CPU if self.device == "cpu" else BACKEND_GPU
