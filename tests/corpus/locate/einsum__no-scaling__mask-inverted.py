# attn-kit: mha-screen
# locate corpus: bases/einsum.py with no-scaling, mask-inverted
"""A correct solution with NumPy einsum, written independently of the kit's references.

Written independently of the kit's references and bug variants (tests/test_diagnosis.py).
"""
import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=float)
    keep = np.ones(s.shape, dtype=bool) if allowed is None else np.array(allowed, dtype=bool)
    if not keep.any():
        return np.zeros_like(s)
    e = np.where(keep, np.exp(np.where(keep, s - s[keep].max(), 0.0)), 0.0)
    return e / e.sum()


def causal_mask(B, T):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return np.repeat((j <= i)[None], B, axis=0)


def padding_mask(lengths, T):
    L = np.asarray(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(np.arange(T).reshape(1, 1, T) < L, (len(lengths), T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"D={D} is not divisible by num_heads={num_heads}")
    H, hd = num_heads, D // num_heads

    def proj(name):
        y = np.einsum("btd,de->bte", x, np.asarray(params["W" + name], dtype=float))
        bias = params.get("b" + name)
        return y if bias is None else y + np.asarray(bias, dtype=float)

    q, k, v = (proj(n).reshape(B, T, H, hd) for n in "qkv")
    scores = np.einsum("bihc,bjhc->bhij", q, k)
    allowed = np.ones((B, T, T), dtype=bool) if mask is None else ~np.asarray(mask, dtype=bool)
    allowed = np.broadcast_to(allowed[:, None], scores.shape)
    live = allowed.any(axis=-1, keepdims=True)
    top = np.where(live, np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True), 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, scores - top, 0.0)), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z > 0, z, 1.0)
    heads = np.einsum("bhij,bjhc->bihc", w, v).reshape(B, T, D)
    out = heads @ np.asarray(params["Wo"], dtype=float)
    if params.get("bo") is not None:
        out = out + np.asarray(params["bo"], dtype=float)
    return (out, w) if return_weights else out
