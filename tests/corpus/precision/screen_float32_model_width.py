# attn-kit: mha-screen
"""A solution with scores scaled by sqrt(D), not sqrt(head width), that computes everything in float32 (einsum style)."""
import numpy as np

F = np.float32


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=F)
    ok = np.ones(s.shape, bool) if allowed is None else np.asarray(allowed, bool)
    if not ok.any():
        return np.zeros(s.shape, F)
    m = s[ok].max()
    e = np.where(ok, np.exp(np.where(ok, s - m, F(0))), F(0))
    return e / e.sum()


def causal_mask(B, T):
    return np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T)).copy()


def padding_mask(lengths, T):
    return np.array([[[j < n for j in range(T)] for _ in range(T)] for n in lengths], dtype=bool).reshape(len(lengths), T, T)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=F)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    H, hd = num_heads, D // num_heads

    def lin(a, w, b):
        y = np.einsum("btd,de->bte", a, np.asarray(params[w], F))
        return y + np.asarray(params[b], F) if params.get(b) is not None else y

    q = lin(x, "Wq", "bq").reshape(B, T, H, hd)
    k = lin(x, "Wk", "bk").reshape(B, T, H, hd)
    v = lin(x, "Wv", "bv").reshape(B, T, H, hd)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / F(np.sqrt(D))
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.asarray(mask, bool)[:, None]
    ok = np.broadcast_to(ok, s.shape)
    s = np.where(ok, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, F(0))
    e = np.where(ok, np.exp(s - m), F(0))
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.where(tot > 0, tot, F(1))
    o = np.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, T, D)
    out = lin(o, "Wo", "bo")
    return (out, w) if return_weights else out
