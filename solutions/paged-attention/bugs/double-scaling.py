# attn-kit: paged-attention
"""Reference solution for paged-attention: one decode step over a KV cache kept in fixed-size blocks.

The pool holds N blocks of block_size token slots, shared by every sequence; a sequence's block
table lists, in token order, the blocks that hold its tokens. Token t of sequence b lives in block
block_tables[b][t // block_size], slot t % block_size. Only the first context_lens[b] tokens are
read, by index, so slots past the length and blocks the table does not list are never touched:
whatever garbage they hold cannot reach the output. The pool is read, never written.
"""
import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=np.float64)               # B×H×d
    k_pool = np.asarray(k_pool)                       # N×block_size×H×d (not converted: no pool copy)
    v_pool = np.asarray(v_pool)
    B, H, d = q.shape
    block_size = k_pool.shape[1]
    scale = 1.0 / np.sqrt(d) ** 2                     # BUG(double-scaling): divided by sqrt(d) twice, so by d
    out = np.zeros((B, H, v_pool.shape[-1]))
    for b in range(B):
        n = int(context_lens[b])
        if n == 0:
            continue                                  # nothing to attend to: the output stays 0
        table = np.asarray([int(x) for x in block_tables[b]], dtype=np.int64)   # in the table's order
        t = np.arange(n)                              # the tokens to read, no more
        blocks, slots = table[t // block_size], t % block_size
        keys = k_pool[blocks, slots].astype(np.float64)      # n×H×d, gathered in token order
        values = v_pool[blocks, slots].astype(np.float64)
        scores = np.einsum("hd,nhd->hn", q[b], keys) * scale  # H×n, one row per head
        scores -= scores.max(axis=1, keepdims=True)
        w = np.exp(scores)
        w /= w.sum(axis=1, keepdims=True)
        out[b] = np.einsum("hn,nhd->hd", w, values)
    return out
