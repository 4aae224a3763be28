# attn-kit: rope
"""A correct rope solution written the way production code writes it: inverse frequencies, angles,
cos and sin all in float32 (as LLaMA-style implementations cache them), rotate_half, and float32
attention. It must pass: the statement does not ask for float64."""
import numpy as np


def _rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=np.float32)
    hd = x.shape[-1]
    if hd % 2 != 0:
        raise ValueError("head width must be even for rotary embeddings")
    inv_freq = (1.0 / (np.float32(base) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)))).astype(np.float32)
    t = np.asarray(positions).astype(np.float32)
    freqs = np.outer(t, inv_freq).astype(np.float32)          # T×hd/2
    emb = np.concatenate([freqs, freqs], axis=-1)              # T×hd
    cos, sin = np.cos(emb), np.sin(emb)
    return (x * cos + _rotate_half(x) * sin).astype(np.float32)


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float32)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads (and num_heads must be at least 1)")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("the head width D // num_heads must be even")
    pos = np.arange(T) if positions is None else positions

    def proj(w, b):
        y = x @ np.asarray(params[w], dtype=np.float32)
        if params.get(b) is not None:
            y = y + np.asarray(params[b], dtype=np.float32)
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q = apply_rope(proj("Wq", "bq"), pos)
    k = apply_rope(proj("Wk", "bk"), pos)
    v = proj("Wv", "bv")
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.float32(np.sqrt(hd))
    ok = np.ones((B, 1, T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)[:, None]
    s = np.where(ok, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0).astype(np.float32)
    e = np.where(ok, np.exp(s - top), 0).astype(np.float32)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z > 0, z, 1).astype(np.float32)
    o = np.einsum("bhij,bhjd->bhid", w, v).transpose(0, 2, 1, 3).reshape(B, T, D)
    o = o @ np.asarray(params["Wo"], dtype=np.float32)
    if params.get("bo") is not None:
        o = o + np.asarray(params["bo"], dtype=np.float32)
    return (o, w) if return_weights else o
