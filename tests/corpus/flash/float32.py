# attn-kit: flash-backward
"""Written from the statement alone, computing in float32 throughout (as a GPU kernel's
accumulators would): block slices are cast to float32, results returned in float32."""

import numpy as np

F = np.float32


def _check(bq, bk):
    if bq < 1 or bk < 1:
        raise ValueError("block sizes must be >= 1")


def _scores(qi, kj, mask, causal, i0, j0, off):
    s = (qi @ kj.T) * F(1.0 / np.sqrt(qi.shape[1]))
    if mask is not None:
        s = np.where(mask[i0 : i0 + len(qi), j0 : j0 + len(kj)], s, F(-np.inf))
    if causal:
        r = np.arange(i0, i0 + len(qi))[:, None]
        c = np.arange(j0, j0 + len(kj))[None, :]
        s = np.where(c <= r + off, s, F(-np.inf))
    return s.astype(F)


def flash_forward(q, k, v, mask=None, causal=False, block_q=64, block_k=64):
    _check(block_q, block_k)
    T, S, dv = q.shape[0], k.shape[0], v.shape[1]
    out = np.zeros((T, dv), F)
    lse = np.full(T, -np.inf, F)
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        qi = q[i0:i1].astype(F)
        m = np.full(i1 - i0, -np.inf, F)
        l = np.zeros(i1 - i0, F)
        acc = np.zeros((i1 - i0, dv), F)
        for j0 in range(0, S, block_k):
            if causal and j0 > i1 - 1 + S - T:
                break
            j1 = min(j0 + block_k, S)
            s = _scores(qi, k[j0:j1].astype(F), mask, causal, i0, j0, S - T)
            mn = np.maximum(m, s.max(axis=1))
            sh = np.where(np.isfinite(mn), mn, F(0))
            a = np.exp(m - sh)
            p = np.exp(s - sh[:, None])
            l = a * l + p.sum(axis=1)
            acc = a[:, None] * acc + p @ v[j0:j1].astype(F)
            m = mn
        ok = l > 0
        out[i0:i1][ok] = acc[ok] / l[ok, None]
        lse[i0:i1][ok] = m[ok] + np.log(l[ok])
    return out, lse


def flash_backward(q, k, v, out, lse, d_out, mask=None, causal=False, block_q=64, block_k=64):
    _check(block_q, block_k)
    T, S = q.shape[0], k.shape[0]
    do = np.asarray(d_out).astype(F)
    D = (do * np.asarray(out).astype(F)).sum(axis=1)
    lse32 = np.asarray(lse).astype(F)
    sh = np.where(np.isfinite(lse32), lse32, F(0))
    dq = np.zeros(q.shape, F)
    dk = np.zeros(k.shape, F)
    dv = np.zeros(v.shape, F)
    c = F(1.0 / np.sqrt(q.shape[1]))
    for j0 in range(0, S, block_k):
        j1 = min(j0 + block_k, S)
        kj, vj = k[j0:j1].astype(F), v[j0:j1].astype(F)
        for i0 in range(0, T, block_q):
            i1 = min(i0 + block_q, T)
            if causal and j0 > i1 - 1 + S - T:
                continue
            qi = q[i0:i1].astype(F)
            p = np.exp(_scores(qi, kj, mask, causal, i0, j0, S - T) - sh[i0:i1, None])
            dv[j0:j1] += p.T @ do[i0:i1]
            ds = p * (do[i0:i1] @ vj.T - D[i0:i1, None])
            dq[i0:i1] += (ds @ kj) * c
            dk[j0:j1] += (ds.T @ qi) * c
    return dq, dk, dv
