# attn-kit: paged-attention
"""Known bug `blocked-row-nan`: a sequence of length 0 is not special-cased: its empty row of scores gets a max of -inf, and the deferred normalisation divides 0 by 0, so its output is NaN.

The reference solution with exactly one change, marked BUG(blocked-row-nan).
"""
import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=np.float64)               # B×H×d
    k_pool = np.asarray(k_pool)                       # N×block_size×H×d (not converted: no pool copy)
    v_pool = np.asarray(v_pool)
    B, H, d = q.shape
    block_size = k_pool.shape[1]
    scale = 1.0 / np.sqrt(d)
    out = np.zeros((B, H, v_pool.shape[-1]))
    for b in range(B):
        n = int(context_lens[b])
        # BUG(blocked-row-nan): no special case for a sequence of length 0 ...
        table = np.asarray([int(x) for x in block_tables[b]], dtype=np.int64)   # in the table's order
        t = np.arange(n)                              # the tokens to read, no more
        blocks, slots = table[t // block_size], t % block_size
        keys = k_pool[blocks, slots].astype(np.float64)      # n×H×d, gathered in token order
        values = v_pool[blocks, slots].astype(np.float64)
        scores = np.einsum("hd,nhd->hn", q[b], keys) * scale  # H×n, one row per head
        scores -= scores.max(axis=1, keepdims=True, initial=-np.inf)
        w = np.exp(scores)
        with np.errstate(invalid="ignore"):   # BUG(blocked-row-nan): ... so an empty context divides 0 by 0
            out[b] = np.einsum("hn,nhd->hd", w, values) / w.sum(axis=1)[:, None]
    return out
