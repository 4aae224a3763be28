# attn-kit: varlen-prefill
"""Written from the statement alone, computing in float32 throughout, one head at a time. Correct
within float32 rounding."""

import numpy as np


def rope(x, pos):
    d = x.shape[-1]
    h = d // 2
    inv = (10000.0 ** (-2.0 * np.arange(h) / d)).astype(np.float32)
    ang = pos.astype(np.float32)[:, None] * inv[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[:, :h], x[:, h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=1)


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    q = np.asarray(q, dtype=np.float32)
    k = np.asarray(k, dtype=np.float32)
    v = np.asarray(v, dtype=np.float32)
    H, Hkv = q.shape[1], k.shape[1]
    out = np.zeros((q.shape[0], H, v.shape[2]), dtype=np.float32)
    for i in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
        k0, k1 = int(cu_seqlens_k[i]), int(cu_seqlens_k[i + 1])
        nq, nk = q1 - q0, k1 - k0
        if nq == 0:
            continue
        off = nk - nq
        mask = np.tril(np.ones((nq, nk), dtype=bool), k=off)
        for h in range(H):
            g = h // (H // Hkv)
            qh = rope(q[q0:q1, h], np.arange(off, nk))
            kh = rope(k[k0:k1, g], np.arange(nk))
            s = (qh @ kh.T) / np.float32(np.sqrt(q.shape[2]))
            s = np.where(mask, s, np.float32(-np.inf))
            w = np.exp(s - s.max(axis=1, keepdims=True))
            out[q0:q1, h] = (w / w.sum(axis=1, keepdims=True)) @ v[k0:k1, g]
    return out
