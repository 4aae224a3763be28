# attn-kit: varlen-prefill
"""Written from the statement but with np.tril's default diagonal: a chunk after a cache is
aligned top-left. Right for one-shot prefill; the diagnosis names causal-alignment-wrong."""

import numpy as np


def rope(x, pos):
    d = x.shape[-1]
    h = d // 2
    ang = np.outer(pos, 10000.0 ** (-2.0 * np.arange(h) / d))[:, None, :]
    return np.concatenate([x[..., :h] * np.cos(ang) - x[..., h:] * np.sin(ang), x[..., h:] * np.cos(ang) + x[..., :h] * np.sin(ang)], -1)


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    H, Hkv = q.shape[1], k.shape[1]
    out = np.zeros((len(q), H, v.shape[2]))
    for i in range(len(cu_seqlens_q) - 1):
        a, b, c, e = (int(x) for x in (cu_seqlens_q[i], cu_seqlens_q[i + 1], cu_seqlens_k[i], cu_seqlens_k[i + 1]))
        if b == a:
            continue
        nq, nk = b - a, e - c
        qr = rope(q[a:b], np.arange(nk - nq, nk))
        kr = np.repeat(rope(k[c:e], np.arange(nk)), H // Hkv, axis=1)
        vv = np.repeat(v[c:e], H // Hkv, axis=1)
        s = np.einsum("thd,jhd->htj", qr, kr) / np.sqrt(q.shape[2])
        s = np.where(np.tril(np.ones((nq, nk), dtype=bool)), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        out[a:b] = np.einsum("htj,jhv->thv", w / w.sum(-1, keepdims=True), vv)
    return out
