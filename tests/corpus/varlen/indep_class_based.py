# attn-kit: varlen-prefill
"""Written from the statement alone: a class that precomputes a RoPE table, complex rotation,
query heads grouped by reshaping to (H_kv, group). Correct."""

import numpy as np


class PackedCausalAttention:
    def __init__(self, base=10000.0):
        self.base = base

    def _turn(self, x, positions):
        half = x.shape[-1] // 2
        freqs = self.base ** (-np.arange(0, x.shape[-1], 2) / x.shape[-1])
        z = (x[..., :half] + 1j * x[..., half:]) * np.exp(1j * np.outer(positions, freqs))[:, None, :]
        return np.concatenate([z.real, z.imag], axis=-1)

    def document(self, q, k, v):
        n_q, H, d = q.shape
        n_k, H_kv, _ = k.shape
        start = n_k - n_q
        qr = self._turn(q, np.arange(start, n_k)).reshape(n_q, H_kv, H // H_kv, d)
        kr = self._turn(k, np.arange(n_k))
        s = np.einsum("tgrd,jgd->grtj", qr, kr) / np.sqrt(d)
        future = np.arange(n_k)[None, :] > (start + np.arange(n_q))[:, None]
        s[..., future] = -np.inf
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        return np.einsum("grtj,jgv->tgrv", s, v).reshape(n_q, H, v.shape[-1])

    def __call__(self, q, k, v, cu_q, cu_k):
        q, k, v = (np.array(a, dtype=float) for a in (q, k, v))
        out = np.zeros((q.shape[0], q.shape[1], v.shape[2]))
        for a, b, c, e in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:]):
            if b > a:
                out[a:b] = self.document(q[a:b], k[c:e], v[c:e])
        return out


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    return PackedCausalAttention()(q, k, v, list(cu_seqlens_q), list(cu_seqlens_k))
