"""Paged attention written independently that attends to whole blocks, past the context length. Not derived from the kit's files:
the diagnosis must still name the mistake."""
import math
import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, float)
    bs = k_pool.shape[1]
    out = np.zeros(q.shape)
    for b in range(q.shape[0]):
        n = int(context_lens[b])
        if n == 0:
            continue
        used = list(block_tables[b])[: (n + bs - 1) // bs]
        keys = np.concatenate([k_pool[i] for i in used])        # whole blocks: reads past n
        vals = np.concatenate([v_pool[i] for i in used])
        s = np.einsum("nhd,hd->hn", keys, q[b]) / math.sqrt(q.shape[2])
        w = np.exp(s - s.max(1, keepdims=True))
        out[b] = np.einsum("hn,nhd->hd", w / w.sum(1, keepdims=True), vals)
    return out
