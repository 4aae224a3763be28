# attn-kit: mha-screen
"""Builds the mask and never applies it: the `** 0` turns its factor into 1, so every query
attends to every key. (Off-catalogue until issue 21 added mask-ignored.)"""
import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=float)
    ok = np.ones(s.shape, bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if not ok.any():
        return np.zeros_like(s)
    top = s[ok].max()
    e = np.where(ok, np.exp(np.where(ok, s - top, 0.0)), 0.0)
    return e / e.sum()


def causal_mask(B, T):
    i, j = np.indices((T, T))
    return np.repeat((j <= i)[None], B, axis=0)


def padding_mask(lengths, T):
    n = np.asarray(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(np.arange(T)[None, None, :] < n, (n.shape[0], T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    H = num_heads
    hd = D // H

    def proj(a, w, b):
        y = np.einsum("btd,de->bte", a, np.asarray(params[w], dtype=float))
        if params.get(b) is not None:
            y = y + np.asarray(params[b], dtype=float)
        return y

    q = proj(x, "Wq", "bq").reshape(B, T, H, hd)
    k = proj(x, "Wk", "bk").reshape(B, T, H, hd)
    v = proj(x, "Wv", "bv").reshape(B, T, H, hd)
    s = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(hd)
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.asarray(mask, dtype=bool)[:, None]
    ok = np.broadcast_to(ok, s.shape)
    s = s
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    total = e.sum(axis=-1, keepdims=True) * np.where(ok, 1.0, np.inf).min(axis=-1, keepdims=True) ** 0
    w = e / np.where(total > 0, total, 1.0)
    o = np.einsum("bhij,bjhd->bihd", w, v).reshape(B, T, D)
    out = proj(o, "Wo", "bo")
    return (out, w) if return_weights else out
