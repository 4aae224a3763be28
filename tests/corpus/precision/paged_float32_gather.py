# attn-kit: paged-attention
"""A correct paged-attention solution in float32: gather each sequence's tokens with np.take,
then a float32 softmax per head. It must pass: the statement does not ask for float64."""
import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=np.float32)
    k_pool = np.asarray(k_pool)
    v_pool = np.asarray(v_pool)
    B, H, d = q.shape
    bs = k_pool.shape[1]
    out = np.zeros((B, H, v_pool.shape[-1]), dtype=np.float32)
    for b in range(B):
        n = int(context_lens[b])
        if n <= 0:
            continue
        ids = np.asarray(list(block_tables[b]), dtype=np.int64)[: (n + bs - 1) // bs]
        keys = np.take(k_pool, ids, axis=0).reshape(-1, H, d)[:n].astype(np.float32)
        vals = np.take(v_pool, ids, axis=0).reshape(-1, H, v_pool.shape[-1])[:n].astype(np.float32)
        s = np.einsum("hd,nhd->hn", q[b], keys) * np.float32(1.0 / np.sqrt(d))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        out[b] = np.einsum("hn,nhe->he", p, vals)
    return out
