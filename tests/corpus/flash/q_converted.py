# attn-kit: flash-backward
"""Written from the statement alone with explicit Python loops over the queries of each block
pair, one NumPy row at a time; q is converted whole at the top of each pass (the common
`np.asarray` idiom), k and v are sliced once per block pair."""

import math

import numpy as np


def _allowed(mask, causal, i, j0, j1, offset):
    ok = np.ones(j1 - j0, dtype=bool) if mask is None else mask[i, j0:j1].copy()
    if causal:
        ok &= np.arange(j0, j1) <= i + offset
    return ok


def flash_forward(q, k, v, mask=None, causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be at least 1")
    q = np.asarray(q, dtype=np.float64)
    T, d = q.shape
    S, dv = v.shape
    out = np.zeros((T, dv))
    lse = np.full(T, -math.inf)
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        rows = q[i0:i1]
        m = [-math.inf] * (i1 - i0)
        l = [0.0] * (i1 - i0)
        acc = [np.zeros(dv) for _ in range(i1 - i0)]
        for j0 in range(0, S, block_k):
            if causal and j0 > i1 - 1 + S - T:
                break
            j1 = min(j0 + block_k, S)
            keys, vals = k[j0:j1], v[j0:j1]
            for a in range(i1 - i0):
                ok = _allowed(mask, causal, i0 + a, j0, j1, S - T)
                if not ok.any():
                    continue
                s = keys[ok] @ rows[a] / math.sqrt(d)
                top = max(m[a], float(s.max()))
                r = math.exp(m[a] - top) if m[a] != -math.inf else 0.0
                w = np.exp(s - top)
                l[a] = l[a] * r + float(w.sum())
                acc[a] = acc[a] * r + w @ vals[ok]
                m[a] = top
        for a in range(i1 - i0):
            if l[a] > 0:
                out[i0 + a] = acc[a] / l[a]
                lse[i0 + a] = m[a] + math.log(l[a])
    return out, lse


def flash_backward(q, k, v, out, lse, d_out, mask=None, causal=False, block_q=64, block_k=64):
    if block_q < 1 or block_k < 1:
        raise ValueError("block_q and block_k must be at least 1")
    q = np.asarray(q, dtype=np.float64)
    T, d = q.shape
    S, dv = v.shape
    c = 1.0 / math.sqrt(d)
    D = [float(np.dot(d_out[i], out[i])) for i in range(T)]
    dq = np.zeros((T, d))
    dk = np.zeros((S, d))
    dvv = np.zeros((S, dv))
    for j0 in range(0, S, block_k):
        j1 = min(j0 + block_k, S)
        keys, vals = k[j0:j1], v[j0:j1]
        for i0 in range(0, T, block_q):
            i1 = min(i0 + block_q, T)
            if causal and j0 > i1 - 1 + S - T:
                continue
            rows = q[i0:i1]
            for a in range(i1 - i0):
                i = i0 + a
                if lse[i] == -math.inf:
                    continue
                ok = _allowed(mask, causal, i, j0, j1, S - T)
                p = np.where(ok, np.exp(np.where(ok, keys @ rows[a] * c - lse[i], -np.inf)), 0.0)
                dvv[j0:j1] += np.outer(p, d_out[i])
                ds = p * (vals @ d_out[i] - D[i]) * c
                dq[i] += ds @ keys
                dk[j0:j1] += np.outer(ds, rows[a])
    return dq, dk, dvv
