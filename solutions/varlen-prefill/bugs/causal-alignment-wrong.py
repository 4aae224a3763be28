# attn-kit: varlen-prefill
"""Known bug `causal-alignment-wrong`: the causal bound is aligned top-left: query t sees keys 0..t only.

The reference solution with exactly one change, marked BUG(causal-alignment-wrong).
"""
import numpy as np


def rope(x, positions, base=10000.0):
    """x n×heads×d (d even), rotated pair by pair at one position per row."""
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[-1] // 2
    theta = base ** (-2.0 * np.arange(half, dtype=np.float64) / x.shape[-1])
    angles = np.asarray(positions, dtype=np.float64)[:, None] * theta      # n×half
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]      # broadcast over heads
    first, second = x[..., :half], x[..., half:]                          # column i pairs with i + half
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))    # total_q×H×d, total_k×H_kv×d, total_k×H_kv×dv
    cu_q = [int(c) for c in cu_seqlens_q]
    cu_k = [int(c) for c in cu_seqlens_k]
    H, d = q.shape[1], q.shape[2]
    H_kv, dv = v.shape[1], v.shape[2]
    if H_kv < 1 or H % H_kv:
        raise ValueError(f"num_heads={H} is not divisible by num_kv_heads={H_kv}")
    group = H // H_kv
    out = np.zeros((q.shape[0], H, dv))
    for i in range(len(cu_q) - 1):
        qs, qe = cu_q[i], cu_q[i + 1]
        ks, ke = cu_k[i], cu_k[i + 1]
        n_q, n_k = qe - qs, ke - ks
        if n_q == 0:
            continue                                  # an empty document (or one with only a cache): no rows
        cached = n_k - n_q                            # keys before the chunk: the queries' positions start there
        q_doc = rope(q[qs:qe], np.arange(cached, n_k))
        k_doc = rope(k[ks:ke], np.arange(n_k))
        v_doc = v[ks:ke]
        k_doc = np.repeat(k_doc, group, axis=1)        # K/V head g serves query heads g·group .. g·group + group - 1
        v_doc = np.repeat(v_doc, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q_doc, k_doc) / np.sqrt(d)     # H×n_q×n_k
        allowed = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None]  # BUG(causal-alignment-wrong): cache not counted
        scores = np.where(allowed, scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights = weights / weights.sum(axis=-1, keepdims=True)
        out[qs:qe] = np.einsum("hqk,khv->qhv", weights, v_doc)
    return out
