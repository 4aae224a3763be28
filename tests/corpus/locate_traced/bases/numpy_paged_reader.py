# attn-kit: paged-attention
"""Base of the traced-locate corpus: paged attention read token by token through a callable class."""
import numpy as np


def _gather(pool, table, n, size):
    rows = []
    for t in range(n):
        rows.append(pool[int(table[t // size]), t % size])
    return np.stack(rows).astype(np.float64)


class Reader:
    def __init__(self, k_pool, v_pool):
        self.k_pool, self.v_pool = k_pool, v_pool
        self.size = np.shape(k_pool)[1]

    def __call__(self, query, table, n):
        keys = _gather(self.k_pool, table, n, self.size)
        values = _gather(self.v_pool, table, n, self.size)
        scores = np.einsum("nhd,hd->hn", keys, query) / np.sqrt(query.shape[-1])
        scores = scores - scores.max(axis=-1, keepdims=True)
        w = np.exp(scores)
        w = w / w.sum(axis=-1, keepdims=True)
        return np.einsum("hn,nhe->he", w, values)


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=np.float64)
    k_pool, v_pool = np.asarray(k_pool), np.asarray(v_pool)
    read = Reader(k_pool, v_pool)
    out = np.zeros((q.shape[0], q.shape[1], v_pool.shape[-1]))
    for b, n in enumerate(context_lens):
        if int(n) > 0:
            out[b] = read(q[b], block_tables[b], int(n))
    return out
