# attn-kit: rope
import numpy as np


def apply_rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=float)
    hd = x.shape[-1]
    if hd % 2 != 0:
        raise ValueError("head width must be even for rotary embeddings")
    half = hd // 2
    i = np.arange(half)
    theta = (base) ** (-2.0 * i / hd)
    ang = np.asarray(positions, dtype=float)[:, None] * theta[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def _add(y, b):
    return y if b is None else y + np.asarray(b, dtype=float)


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D is not divisible by num_heads")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("head width must be even")
    pos = np.arange(T) if positions is None else positions

    def split(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q = apply_rope(split(_add(x @ np.asarray(params["Wq"], dtype=float), params.get("bq"))), pos)
    k = apply_rope(split(x @ np.asarray(params["Wk"], dtype=float)), pos)
    v = split(_add(x @ np.asarray(params["Wv"], dtype=float), params.get("bv")))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is not None:
        ok = np.asarray(mask, dtype=bool)[:, None]
        s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z > 0, z, 1.0)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = _add(merged @ np.asarray(params["Wo"], dtype=float), params.get("bo"))
    return (out, w) if return_weights else out
