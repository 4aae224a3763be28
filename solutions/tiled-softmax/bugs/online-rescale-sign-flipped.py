# attn-kit: tiled-softmax
"""Known bug `online-rescale-sign-flipped`: when a block raises the running max, the sum and accumulator are multiplied by exp(m_new - m_old) instead of exp(m_old - m_new), so early blocks are inflated instead of shrunk.

The reference solution with exactly one change, marked BUG(online-rescale-sign-flipped).
"""
import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    q = np.asarray(q, dtype=np.float64)               # T×d   (no copy when already float64)
    k = np.asarray(k, dtype=np.float64)               # S×d
    v = np.asarray(v, dtype=np.float64)               # S×dv
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)           # T×S, True = allowed (no copy when already bool)
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    T, d = q.shape
    S, dv = v.shape
    scale = 1.0 / np.sqrt(d)
    m = np.full(T, -np.inf)                           # running max of the allowed scores
    l = np.zeros(T)                                   # running sum of exp(score - m)
    acc = np.zeros((T, dv))                           # running sum of exp(score - m) · v
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        s = q @ k[start:stop].T                       # T×b: this block's scores only
        s *= scale
        if mask is not None:
            s[~mask[:, start:stop]] = -np.inf         # blocked keys: exp(-inf) = 0 below
        m_new = np.maximum(m, s.max(axis=1))          # still -inf for a query with nothing allowed yet
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.exp(np.where(np.isfinite(m), shift - m, -np.inf))  # BUG(online-rescale-sign-flipped): exp(m_new - m_old)
        s -= shift[:, None]
        np.exp(s, out=s)                              # s now holds p = exp(score - m_new)
        l = l * alpha + s.sum(axis=1)
        acc *= alpha[:, None]
        acc += s @ v[start:stop]
        m = m_new
    out = np.zeros((T, dv))
    np.divide(acc, l[:, None], out=out, where=l[:, None] > 0)     # no allowed key: stays 0
    return out
