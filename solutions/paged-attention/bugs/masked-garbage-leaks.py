# attn-kit: paged-attention
"""Known bug `masked-garbage-leaks`: every slot of the blocks in use is scored and exponentiated, and the slots past the length are zeroed afterwards (exp(s) * valid): NaN or huge garbage there turns into NaN * 0 or inf * 0 = NaN.

The reference solution with exactly one change, marked BUG(masked-garbage-leaks).
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
        if n == 0:
            continue                                  # nothing to attend to: the output stays 0
        table = np.asarray([int(x) for x in block_tables[b]], dtype=np.int64)   # in the table's order
        t = np.arange(-(-n // block_size) * block_size)  # BUG(masked-garbage-leaks): every slot of the blocks in use ...
        valid = t < n                                 # ... with the slots past the length zeroed after exp
        blocks, slots = table[t // block_size], t % block_size
        keys = k_pool[blocks, slots].astype(np.float64)      # n×H×d, gathered in token order
        values = v_pool[blocks, slots].astype(np.float64)
        scores = np.einsum("hd,nhd->hn", q[b], keys) * scale  # H×n, one row per head
        scores -= scores[:, valid].max(axis=1, keepdims=True)
        w = np.exp(scores) * valid  # BUG(masked-garbage-leaks): inf * 0 and NaN * 0 are NaN
        w /= w.sum(axis=1, keepdims=True)
        out[b] = np.einsum("hn,nhd->hd", w, values)
    return out
