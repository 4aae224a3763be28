# attn-kit: rope
"""The rotation turns the wrong way, the scores are not scaled, b_v is never added (a class)."""

import numpy as np


class Rotary:
    """Rotate-half rotary embeddings, its angle table built per call."""

    def __init__(self, base=10000.0):
        self.base = base

    def table(self, positions, hd):
        inv = self.base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        angles = np.outer(np.asarray(positions, dtype=np.float64), inv)
        return np.cos(angles), np.sin(angles)

    def __call__(self, x, positions):
        x = np.asarray(x, dtype=np.float64)
        hd = x.shape[-1]
        if hd % 2:
            raise ValueError("odd head width")
        cos, sin = self.table(positions, hd)
        a, b = x[..., : hd // 2], x[..., hd // 2 :]
        return np.concatenate([a * cos + b * sin, b * cos - a * sin], axis=-1)


def apply_rope(x, positions, base=10000.0):
    return Rotary(base)(x, positions)


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("num_heads must divide D")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("odd head width")
    pos = np.arange(T) if positions is None else positions
    rot = Rotary()

    def proj(w, b):
        y = x @ np.asarray(params[w], dtype=np.float64)
        return y + np.asarray(params[b]) if b and params.get(b) is not None else y

    def heads(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = rot(heads(proj("Wq", "bq")), pos), rot(heads(proj("Wk", "bk")), pos), heads(proj("Wv", None))
    s = q @ k.transpose(0, 1, 3, 2)
    if mask is not None:
        s = np.where(np.asarray(mask, dtype=bool)[:, None], s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.where(tot == 0, 1.0, tot)
    o = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ np.asarray(params["Wo"], dtype=np.float64)
    if params.get("bo") is not None:
        o = o + np.asarray(params["bo"])
    return (o, w) if return_weights else o
