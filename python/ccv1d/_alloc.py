"""Output allocation for numpy arrays and torch tensors (the same rules for both, and for torch's
fake tensors under torch.compile, so the real and the fake kernels agree on strides)."""
from ._views import is_torch


def channel_last(x):
    """Dao-AILab's rule: x [B, D, L] is channel-last when its D stride is 1 (and L's is not)."""
    st = x.stride() if is_torch(x) else tuple(s // x.dtype.itemsize for s in x.strides)
    return st[1] == 1 and st[2] != 1


def empty_like(x):
    """Same shape, dtype and (for dense views) the same memory order as x."""
    if is_torch(x):
        import torch
        return torch.empty_like(x)
    import numpy as np
    return np.empty_like(x)


def states(x, slots, dim, k, zero=True):
    """[slots, dim, k] in x's dtype and layout (channel-last x -> channel-last states)."""
    last = channel_last(x)
    shape = (slots, k, dim) if last else (slots, dim, k)
    if is_torch(x):
        import torch
        t = (torch.zeros if zero else torch.empty)(shape, dtype=x.dtype, device=x.device)
        return t.transpose(1, 2) if last else t
    import numpy as np
    a = (np.zeros if zero else np.empty)(shape, dtype=x.dtype)
    return a.transpose(0, 2, 1) if last else a


def empty(shape, like, dtype=None):
    """Contiguous [shape] on like's device, in `dtype` (default like's dtype)."""
    if is_torch(like):
        import torch
        return torch.empty(shape, dtype=dtype or like.dtype, device=like.device)
    import numpy as np
    return np.empty(shape, dtype=dtype or like.dtype)


def zeros(shape, like, dtype=None):
    if is_torch(like):
        import torch
        return torch.zeros(shape, dtype=dtype or like.dtype, device=like.device)
    import numpy as np
    return np.zeros(shape, dtype=dtype or like.dtype)
