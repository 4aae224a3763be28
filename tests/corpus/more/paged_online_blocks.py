# attn-kit: paged-attention
"""A correct paged-attention solution with an online softmax over the blocks of each sequence,
the way a paged kernel walks its block table: one block's scores at a time, a running max, sum
and accumulator per head, nothing gathered into one array."""
import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=np.float64)
    B, H, d = q.shape
    bs = len(k_pool[0])
    out = np.zeros((B, H, np.shape(v_pool)[-1]))
    for b in range(B):
        n = int(context_lens[b])
        m = np.full(H, -np.inf)                 # running max per head (starts at -inf)
        total = np.zeros(H)
        acc = np.zeros_like(out[b])
        for i in range(0, n, bs):
            blk = int(block_tables[b][i // bs])
            used = min(bs, n - i)
            keys = np.asarray(k_pool[blk], dtype=np.float64)[:used]        # used×H×d
            vals = np.asarray(v_pool[blk], dtype=np.float64)[:used]
            s = np.einsum("hd,nhd->hn", q[b], keys) / np.sqrt(d)
            m_new = np.maximum(m, s.max(axis=1))
            alpha = np.exp(m - m_new)
            p = np.exp(s - m_new[:, None])
            total = total * alpha + p.sum(axis=1)
            acc = acc * alpha[:, None] + np.einsum("hn,nhd->hd", p, vals)
            m = m_new
        if n > 0:
            out[b] = acc / total[:, None]
    return out
