# attn-kit: tiled-softmax
"""Correct, in a style unlike the reference: two passes over the key blocks (the row maxima first,
then the sums and the weighted values), a dict of per-block summaries, NumPy float64."""

import numpy as np


def _blocks(S, size):
    return [(lo, min(lo + size, S)) for lo in range(0, S, size)]


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    q, k, v = (np.array(a, dtype=np.float64) for a in (q, k, v))
    T, d = q.shape
    allowed = np.ones((T, k.shape[0]), bool) if mask is None else np.asarray(mask, dtype=bool)
    top = np.full(T, -np.inf)
    for lo, hi in _blocks(k.shape[0], block_size):
        s = np.where(allowed[:, lo:hi], q @ k[lo:hi].T / np.sqrt(d), -np.inf)
        top = np.maximum(top, s.max(axis=1))
    safe = np.where(np.isfinite(top), top, 0.0)
    total, acc = np.zeros(T), np.zeros((T, v.shape[1]))
    for lo, hi in _blocks(k.shape[0], block_size):
        s = np.where(allowed[:, lo:hi], q @ k[lo:hi].T / np.sqrt(d), -np.inf)
        e = np.exp(s - safe[:, None])
        total += e.sum(axis=1)
        acc += e @ v[lo:hi]
    out = np.zeros_like(acc)
    np.divide(acc, total[:, None], out=out, where=total[:, None] > 0)
    return out
