# attn-kit: mha-screen
# traced-locate corpus: bases/numpy_method_loop.py with heads-concatenated-over-time
"""Traced-locate corpus base: NumPy, methods of a plain class, one head at a time."""
import math

import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    ok = np.ones(s.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    filled = np.where(ok, s, -np.inf)
    top = filled.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(filled - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def causal_mask(B, T):
    return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths)[:, None, None]
    return np.broadcast_to(np.arange(T)[None, None, :] < n, (len(lengths), T, T)).copy()


class Layer:
    def __init__(self, params, num_heads):
        self.params = params
        self.num_heads = num_heads

    def weight(self, name):
        return np.asarray(self.params[name], dtype=np.float64)

    def bias(self, name, width):
        b = self.params.get(name)
        return np.zeros(width) if b is None else np.asarray(b, dtype=np.float64)

    def head(self, q, k, v, allowed):
        scores = q @ np.swapaxes(k, -1, -2)
        scaled = scores / math.sqrt(q.shape[-1])
        w = stable_softmax(scaled, allowed)
        return w @ v, w

    def run(self, x, mask):
        B, T, D = x.shape
        hd = D // self.num_heads
        q = x @ self.weight("Wq") + self.bias("bq", D)
        k = x @ self.weight("Wk") + self.bias("bk", D)
        v = x @ self.weight("Wv") + self.bias("bv", D)
        allowed = np.ones((B, T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        outs, weights = [], []
        for h in range(self.num_heads):
            cols = slice(h * hd, (h + 1) * hd)
            o, w = self.head(q[:, :, cols], k[:, :, cols], v[:, :, cols], allowed)
            outs.append(o)
            weights.append(w)
        merged = np.concatenate(outs, axis=1)
        out = merged @ self.weight("Wo") + self.bias("bo", D)
        return out, np.stack(weights, axis=1)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    if num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError("num_heads must divide D")
    out, weights = Layer(params, num_heads).run(x, mask)
    return (out, weights) if return_weights else out
