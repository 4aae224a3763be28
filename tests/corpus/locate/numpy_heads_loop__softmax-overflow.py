# attn-kit: mha-screen
# locate corpus: bases/numpy_heads_loop.py with softmax-overflow
"""Locate corpus base: NumPy, one head at a time, named weights."""
import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    ok = np.ones(s.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    filled = np.where(ok, s, -np.inf)
    top = filled.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(filled), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def causal_mask(B, T):
    rows = np.arange(T)[:, None]
    cols = np.arange(T)[None, :]
    return np.broadcast_to(cols <= rows, (B, T, T)).copy()


def padding_mask(lengths, T):
    keys = np.arange(T)[None, None, :]
    n = np.asarray(lengths)[:, None, None]
    return np.broadcast_to(keys < n, (len(lengths), T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    Wq = np.asarray(params["Wq"], dtype=np.float64)
    Wk = np.asarray(params["Wk"], dtype=np.float64)
    Wv = np.asarray(params["Wv"], dtype=np.float64)
    Wo = np.asarray(params["Wo"], dtype=np.float64)
    zero = np.zeros(D)
    bq = zero if params.get("bq") is None else np.asarray(params["bq"], dtype=np.float64)
    bk = zero if params.get("bk") is None else np.asarray(params["bk"], dtype=np.float64)
    bv = zero if params.get("bv") is None else np.asarray(params["bv"], dtype=np.float64)
    bo = zero if params.get("bo") is None else np.asarray(params["bo"], dtype=np.float64)
    q = x @ Wq + bq
    k = x @ Wk + bk
    v = x @ Wv + bv
    allowed = np.ones((B, T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    heads, weights = [], []
    for h in range(num_heads):
        cols = slice(h * hd, (h + 1) * hd)
        scores = q[:, :, cols] @ np.swapaxes(k[:, :, cols], -1, -2) / np.sqrt(hd)
        w = stable_softmax(scores, allowed)
        weights.append(w)
        heads.append(w @ v[:, :, cols])
    concat = np.concatenate(heads, axis=-1)
    out = concat @ Wo + bo
    if return_weights:
        return out, np.stack(weights, axis=1)
    return out
