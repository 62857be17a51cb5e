"""Independent float64 reference of docs/semantics.md, written as plain loops (numpy arrays only
as containers): forward, its exact adjoint (backward), packed varlen, and the decode update."""
import numpy as np


def _silu(z):
    return z / (1.0 + np.exp(-z))


def _dsilu(z):
    s = 1.0 / (1.0 + np.exp(-z))
    return s * (1.0 + z * (1.0 - s))


def _row(x, w, bias, ids, init, silu, dout=None, dfinal=None):
    """One sequence: x (D, L), ids (L,) or None, init (D, K) or None.

    Forward: returns out (D, L), final (D, K). With dout: also dx, dw, db, dinit (the adjoint)."""
    D, L = x.shape
    W = w.shape[1]
    K = W - 1
    xe = np.concatenate([init if init is not None else np.zeros((D, K)), x], axis=1)  # index t + K
    if ids is None:
        ide = np.zeros(K + L, dtype=np.int64)
    else:
        first = ids[0] if L > 0 else 0
        ide = np.concatenate([np.full(K, first), ids]).astype(np.int64)
    out = np.zeros((D, L))
    pre = np.zeros((D, L))
    for t in range(L):
        if ide[t + K] < 0:
            continue
        acc = np.array(bias, dtype=np.float64) if bias is not None else np.zeros(D)
        for k in range(W):
            src = t - K + k
            if ide[src + K] == ide[t + K]:
                acc = acc + w[:, k] * xe[:, src + K]
        pre[:, t] = acc
        out[:, t] = _silu(acc) if silu else acc
    final = np.zeros((D, K))
    final_src = []  # (j, position in xe) of final-state entries that copy an input
    for j in range(K):
        p = L - K + j
        if L == 0:
            cond = True
        else:
            cond = ids is None or (ide[L - 1 + K] >= 0 and ide[p + K] == ide[L - 1 + K])
        if cond:
            final[:, j] = xe[:, p + K]
            final_src.append((j, p + K))
    if dout is None:
        return out, final
    dxe = np.zeros_like(xe)
    dw = np.zeros_like(w)
    db = np.zeros(D)
    for t in range(L):
        if ide[t + K] < 0:
            continue
        g = dout[:, t] * (_dsilu(pre[:, t]) if silu else 1.0)
        db += g
        for k in range(W):
            src = t - K + k
            if ide[src + K] == ide[t + K]:
                dxe[:, src + K] += w[:, k] * g
                dw[:, k] += g * xe[:, src + K]
    if dfinal is not None:
        for j, q in final_src:
            dxe[:, q] += dfinal[:, j]
    return out, final, dxe[:, K:], dw, db, dxe[:, :K]


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def fwd(x, w, bias=None, seq_idx=None, init=None, silu=False):
    """x (B, D, L) -> out (B, D, L), final (B, D, W-1)."""
    x, w, bias, init = _f64(x), _f64(w), _f64(bias), _f64(init)
    res = [_row(x[b], w, bias, None if seq_idx is None else np.asarray(seq_idx[b]),
                None if init is None else init[b], silu) for b in range(x.shape[0])]
    return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])


def bwd(x, w, bias, dout, seq_idx=None, init=None, dfinal=None, silu=False):
    """-> dx, dweight, dbias, dinitial_states (float64)."""
    x, w, bias, init, dout, dfinal = map(_f64, (x, w, bias, init, dout, dfinal))
    dx = np.zeros_like(x)
    dw = np.zeros_like(w)
    db = np.zeros(w.shape[0])
    dinit = np.zeros((x.shape[0], w.shape[0], w.shape[1] - 1))
    for b in range(x.shape[0]):
        r = _row(x[b], w, bias, None if seq_idx is None else np.asarray(seq_idx[b]),
                 None if init is None else init[b], silu, dout[b], None if dfinal is None else dfinal[b])
        dx[b], dinit[b] = r[2], r[5]
        dw += r[3]
        db += r[4]
    return dx, dw, db, dinit


def varlen(x, w, bias, cu, pool, slots_of, has_init, silu, dout=None, dpool_final=None):
    """x (D, T); pool (S, D, K) read per has_init; returns out, new pool (slots written), and with
    dout: dx, dw, db, dpool_initial."""
    x, w, bias, pool = _f64(x), _f64(w), _f64(bias), _f64(pool)
    D, T = x.shape
    out = np.zeros((D, T))
    new_pool = pool.copy()
    dx, dw, db, dinit = np.zeros((D, T)), np.zeros_like(w), np.zeros(D), np.zeros_like(pool)
    for i in range(len(cu) - 1):
        a, e = int(cu[i]), int(cu[i + 1])
        s = slots_of[i]
        if s < 0:
            continue
        init = pool[s] if has_init[i] else None
        if dout is None:
            o, f = _row(x[:, a:e], w, bias, None, init, silu)
        else:
            o, f, gx, gw, gb, gi = _row(x[:, a:e], w, bias, None, init, silu, _f64(dout)[:, a:e],
                                        None if dpool_final is None else _f64(dpool_final)[s])
            dx[:, a:e] = gx
            dw += gw
            db += gb
            if has_init[i]:
                dinit[s] = gi
        out[:, a:e] = o
        new_pool[s] = f
    if dout is None:
        return out, new_pool
    return out, new_pool, dx, dw, db, dinit


def update(x, state, w, bias=None, silu=False, cache_seqlens=None, indices=None):
    """x (B, D, S); state (slots, D, state_len). Returns out, new state (Dao's update_ref)."""
    x, state, w, bias = _f64(x), _f64(state), _f64(w), _f64(bias)
    B, D, S = x.shape
    W = w.shape[1]
    K = W - 1
    n = state.shape[2]
    out = np.zeros((B, D, S))
    new = state.copy()
    for b in range(B):
        slot = b if indices is None else int(indices[b])
        if slot < 0:
            continue
        if cache_seqlens is None:
            win = np.concatenate([state[slot], x[b]], axis=1)  # (D, n + S)
            taps = [win[:, n + s - K:n + s + 1] for s in range(S)]
            new[slot] = win[:, S:]
        else:
            c = int(cache_seqlens[b])
            prev = np.stack([state[slot][:, (c - K + j) % n] for j in range(K)], axis=1) if K else np.zeros((D, 0))
            cat = np.concatenate([prev, x[b]], axis=1)
            taps = [cat[:, s:s + W] for s in range(S)]
            for s in range(S):
                new[slot][:, (c + s) % n] = x[b][:, s]
        for s in range(S):
            z = (bias if bias is not None else 0.0) + (w * taps[s]).sum(axis=1)
            out[b, :, s] = _silu(z) if silu else z
    return out, new
