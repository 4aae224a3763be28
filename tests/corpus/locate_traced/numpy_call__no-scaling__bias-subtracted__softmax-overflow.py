# attn-kit: mha-screen
# traced-locate corpus: bases/numpy_call.py with no-scaling, bias-subtracted, softmax-overflow
"""Traced-locate corpus base: NumPy, a class with __call__ and closures."""
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
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    return np.broadcast_to(j <= i, (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths)[:, None, None]
    return np.broadcast_to(np.arange(T)[None, None, :] < n, (len(lengths), T, T)).copy()


class MHA:
    def __init__(self, params, num_heads):
        self.p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items() if v is not None}
        self.heads = num_heads

    def __call__(self, x, mask=None):
        B, T, D = x.shape
        H = self.heads
        hd = D // H

        def linear(a, name):
            out = a @ self.p["W" + name]
            if "b" + name in self.p:
                out = out - self.p["b" + name]
            return out

        def split(a):
            return a.reshape(B, T, H, hd).transpose(0, 2, 1, 3)

        def attend(q, k, v):
            scores = q @ k.transpose(0, 1, 3, 2)
            scores = scores
            keep = None if mask is None else np.asarray(mask, dtype=bool)[:, None]
            weights = stable_softmax(scores, keep)
            return weights @ v, weights

        q, k, v = split(linear(x, "q")), split(linear(x, "k")), split(linear(x, "v"))
        heads, weights = attend(q, k, v)
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, D)
        return linear(merged, "o"), weights


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    if num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError("num_heads must divide D")
    out, weights = MHA(params, num_heads)(x, mask)
    return (out, weights) if return_weights else out
