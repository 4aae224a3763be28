"""A correct paged-attention solution written unlike the references: it copies whole blocks,
concatenates them and cuts at the length before any arithmetic touches the garbage."""
import math

import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.array(q, dtype=float)
    bs = np.shape(k_pool)[1]
    results = []
    for b in range(q.shape[0]):
        n = int(context_lens[b])
        used = list(block_tables[b])[: (n + bs - 1) // bs]
        if n == 0:
            results.append(np.zeros((q.shape[1], np.shape(v_pool)[-1])))
            continue
        keys = np.concatenate([np.asarray(k_pool[i]) for i in used])[:n]       # n×H×d
        vals = np.concatenate([np.asarray(v_pool[i]) for i in used])[:n]
        s = np.einsum("nhd,hd->hn", keys, q[b]) / math.sqrt(q.shape[2])
        w = np.exp(s - s.max(axis=1)[:, None])
        w = w / w.sum(axis=1)[:, None]
        results.append(np.einsum("hn,nhd->hd", w, vals))
    return np.stack(results).tolist()
