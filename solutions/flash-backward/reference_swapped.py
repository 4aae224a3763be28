# attn-kit: flash-backward
"""Reference solution for flash-backward with the loops the other way round.

reference_numpy.py runs FlashAttention-2's orders: queries outside in the forward, keys outside
in the backward. This one swaps both. The forward walks the key blocks once and keeps the running
max, sum and accumulator of every query (T-vectors and a T×dv array), updating only the query
blocks a key block reaches. The backward walks the query blocks and adds each block pair's share
into dk and dv. The causal test is the same: query block i0..i1-1 needs key block j0.. only when
j0 <= i1 - 1 + S - T (bottom-right), decided before any slice is read.
"""
import math

import numpy as np


def _blocks(n, size):
    """(start, stop) of each block of `size` over range(n); the last may be shorter."""
    if size < 1:
        raise ValueError(f"block sizes must be at least 1, got {size}")
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _allowed(rows, cols, mask, causal, offset):
    """Boolean block: True where query rows[a] may see key cols[b]."""
    ok = np.ones((len(rows), len(cols)), dtype=bool)
    if mask is not None:
        ok &= np.asarray(mask, dtype=bool)[np.ix_(rows, cols)]
    if causal:
        ok &= cols[None, :] <= rows[:, None] + offset
    return ok


def flash_forward(q, k, v, mask=None, causal=False, block_q=64, block_k=64):
    T, d = q.shape
    S, dv = v.shape
    q_blocks, k_blocks = _blocks(T, block_q), _blocks(S, block_k)
    scale = 1 / math.sqrt(d)
    m = np.full(T, -np.inf)
    l = np.zeros(T)
    acc = np.zeros((T, dv))
    for j0, j1 in k_blocks:                           # keys outside: each k, v block read once
        kj = np.array(k[j0:j1], dtype=np.float64)
        vj = np.array(v[j0:j1], dtype=np.float64)
        for i0, i1 in q_blocks:
            if causal and j0 > i1 - 1 + S - T:
                continue
            qi = np.array(q[i0:i1], dtype=np.float64)
            ok = _allowed(np.arange(i0, i1), np.arange(j0, j1), mask, causal, S - T)
            s = np.where(ok, np.einsum("id,jd->ij", qi, kj) * scale, -np.inf)
            m_old = m[i0:i1]
            m_new = np.maximum(m_old, s.max(axis=1))
            base = np.where(m_new == -np.inf, 0.0, m_new)
            p = np.exp(s - base[:, None])
            keep = np.exp(m_old - base)
            l[i0:i1] = keep * l[i0:i1] + p.sum(axis=1)
            acc[i0:i1] = keep[:, None] * acc[i0:i1] + np.einsum("ij,jv->iv", p, vj)
            m[i0:i1] = m_new
    empty = l == 0
    out = acc / np.where(empty, 1.0, l)[:, None]
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l)))
    return out, lse


def flash_backward(q, k, v, out, lse, d_out, mask=None, causal=False, block_q=64, block_k=64):
    T, d = q.shape
    S, dv = v.shape
    q_blocks, k_blocks = _blocks(T, block_q), _blocks(S, block_k)
    scale = 1 / math.sqrt(d)
    lse = np.array(lse, dtype=np.float64)
    d_out = np.array(d_out, dtype=np.float64)
    delta = np.einsum("iv,iv->i", d_out, np.array(out, dtype=np.float64))   # rowsum(dO ∘ O)
    lse[lse == -np.inf] = 0.0                         # an empty row: every exp below is exp(-inf)
    dq = np.zeros((T, d))
    dk = np.zeros((S, d))
    dv_ = np.zeros((S, dv))
    for i0, i1 in q_blocks:                           # queries outside: dq_i owned by this step
        qi = np.array(q[i0:i1], dtype=np.float64)
        for j0, j1 in k_blocks:
            if causal and j0 > i1 - 1 + S - T:
                break                                 # every later key block is above it too
            kj = np.array(k[j0:j1], dtype=np.float64)
            vj = np.array(v[j0:j1], dtype=np.float64)
            ok = _allowed(np.arange(i0, i1), np.arange(j0, j1), mask, causal, S - T)
            s = np.where(ok, np.einsum("id,jd->ij", qi, kj) * scale, -np.inf)
            p = np.exp(s - lse[i0:i1, None])
            dv_[j0:j1] += np.einsum("ij,iv->jv", p, d_out[i0:i1])
            dp = np.einsum("iv,jv->ij", d_out[i0:i1], vj)
            ds = p * (dp - delta[i0:i1, None]) * scale
            dq[i0:i1] += np.einsum("ij,jd->id", ds, kj)
            dk[j0:j1] += np.einsum("ij,id->jd", ds, qi)
    return dq, dk, dv_
