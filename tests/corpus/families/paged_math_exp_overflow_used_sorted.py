# attn-kit: paged-attention
import math

import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=float)
    B, H, d = q.shape
    bs = np.shape(k_pool)[1]
    out = np.zeros((B, H, np.shape(v_pool)[-1]))
    for b in range(B):
        n = int(context_lens[b])
        table = [int(x) for x in block_tables[b]]
        used = (n + bs - 1) // bs
        order = sorted(table[:used]) + list(table[used:])
        ks, vs = [], []
        for t in range(n):
            blk = order[t // bs]
            ks.append(np.asarray(k_pool[blk][t % bs], dtype=float))
            vs.append(np.asarray(v_pool[blk][t % bs], dtype=float))
        if not ks:
            continue
        K, V = np.stack(ks), np.stack(vs)             # n×H×d
        s = np.einsum("hd,nhd->hn", q[b], K) / math.sqrt(d)
        w = np.array([[math.exp(x) for x in row] for row in s.tolist()])   # no shift
        w = w / w.sum(1, keepdims=True)
        out[b] = np.einsum("hn,nhd->hd", w, V)
    return out
