# attn-kit: varlen-prefill
# traced-locate corpus: bases/numpy_varlen_docs.py with no-scaling, kv-head-mapping-modulo, softmax-wrong-axis
"""Base of the traced-locate corpus: packed documents attended head by head inside a small class."""
import numpy as np


def _rotate(x, pos):
    d = x.shape[-1]
    inv = 10000.0 ** (-np.arange(0, d, 2) / d)
    ang = np.outer(pos, inv)
    c, s = np.cos(ang), np.sin(ang)
    lo, hi = x[:, : d // 2], x[:, d // 2 :]
    return np.concatenate([lo * c - hi * s, hi * c + lo * s], axis=1)


class Document:
    def __init__(self, q, k, v, group):
        self.q, self.k, self.v, self.group = q, k, v, group
        self.past = k.shape[0] - q.shape[0]

    def head(self, h):
        g = h % self.k.shape[1]
        qh = _rotate(self.q[:, h], np.arange(self.past, self.past + self.q.shape[0]))
        kh = _rotate(self.k[:, g], np.arange(self.k.shape[0]))
        s = qh @ kh.T
        ok = np.arange(self.k.shape[0])[None, :] <= self.past + np.arange(self.q.shape[0])[:, None]
        s = np.where(ok, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p = p / p.sum(axis=0, keepdims=True)
        return p @ self.v[:, g]


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    H, Hk = q.shape[1], k.shape[1]
    if Hk < 1 or H % Hk:
        raise ValueError("query heads must be a multiple of key/value heads")
    out = np.zeros((q.shape[0], H, v.shape[2]))
    bounds = list(zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:]))
    for a, b, c, e in bounds:
        if b > a:
            doc = Document(q[a:b], k[c:e], v[c:e], H // Hk)
            out[a:b] = np.stack([doc.head(h) for h in range(H)], axis=1)
    return out
