# attn-kit: tiled-softmax
# Pathological candidate for tiled-softmax: the whole T×S score matrix is kept, in float16 ("only
# two bytes an entry"). At T = S = 2048 that is 8 MiB, under that 12 MiB bound; the memory check
# runs T = 1024 with S = 4T, where it is 8 MiB against a 6 MiB bound and fails. Values also lose
# float16 precision.
"""Scores are computed block by block in float64 but stored in one T×S float16 matrix, then the
online softmax reads them back block by block."""
import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    T, d = q.shape
    S, dv = v.shape
    scores = np.empty((T, S), dtype=np.float16)          # T×S, in the smallest float NumPy has
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        s = q @ k[start:stop].T / np.sqrt(d)
        if mask is not None:
            s[~np.asarray(mask, dtype=bool)[:, start:stop]] = -np.inf
        scores[:, start:stop] = s
    m, l, acc = np.full(T, -np.inf), np.zeros(T), np.zeros((T, dv))
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        s = scores[:, start:stop].astype(np.float64)
        m_new = np.maximum(m, s.max(axis=1))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.exp(m - shift)
        p = np.exp(s - shift[:, None])
        l = l * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None] + p @ v[start:stop]
        m = m_new
    out = np.zeros((T, dv))
    np.divide(acc, l[:, None], out=out, where=l[:, None] > 0)
    return out
