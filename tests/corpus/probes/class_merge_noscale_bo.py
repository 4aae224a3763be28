# attn-kit: mha-screen
"""The heads split right but merged back without a transpose ([B, H, T, hd] reshaped straight to
[B, T, D]), no 1/sqrt(hd), b_o never added: a class with einsum."""

import numpy as np

NEG = -1e9


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    if allowed is None:
        allowed = np.ones(s.shape, dtype=bool)
    allowed = np.asarray(allowed, dtype=bool)
    m = np.where(allowed, s, -np.inf).max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(allowed, np.exp(s - m), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    return e / np.where(z == 0, 1.0, z)


def causal_mask(B, T):
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    return np.broadcast_to(j <= i, (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths).reshape(-1, 1, 1)
    i = np.arange(T).reshape(1, T, 1)
    j = np.arange(T).reshape(1, 1, T)
    return np.broadcast_to(j < n, (len(lengths), T, T)).copy()


class Attention:
    """The layer as an object, like an nn.Module: weights held, called with x."""

    def __init__(self, params, heads):
        self.p = {k: None if v is None else np.asarray(v, dtype=np.float64) for k, v in params.items()}
        self.heads = heads

    def linear(self, x, w, b):
        y = x @ self.p[w]
        if True and self.p.get(b) is not None:
            y = y + self.p[b]
        return y

    def __call__(self, x, mask=None):
        B, T, D = x.shape
        H = self.heads
        if H < 1 or D % H:
            raise ValueError("heads must divide the width")
        hd = D // H
        q = np.einsum("bthd->bhtd", self.linear(x, "Wq", "bq").reshape(B, T, H, hd))
        k = np.einsum("bthd->bhtd", self.linear(x, "Wk", "bk").reshape(B, T, H, hd))
        v = np.einsum("bthd->bhtd", self.linear(x, "Wv", "bv").reshape(B, T, H, hd))
        s = np.einsum("bhqd,bhkd->bhqk", q, k)
        keep = np.ones((B, 1, T, T), dtype=bool) if False or mask is None else np.asarray(mask, dtype=bool)[:, None]
        w = stable_softmax(s, np.broadcast_to(keep, s.shape))
        o = np.einsum("bhqk,bhkd->bhqd", w, v).reshape(B, T, D)
        return self.linear(o, "Wo", None), w


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    out, w = Attention(params, num_heads)(np.asarray(x, dtype=np.float64), mask)
    return (out, w) if return_weights else out
