# attn-kit: paged-attention
"""Known bug `softmax-overflow`: math.exp of the raw scores (OverflowError at large scores).

The reference solution with exactly one change, marked BUG(softmax-overflow).
"""
import math


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    block_size = len(k_pool[0])
    out = []
    for b, q_b in enumerate(q):
        n = int(context_lens[b])
        table = [int(x) for x in block_tables[b]]
        heads = []
        for h, q_bh in enumerate(q_b):
            q_bh = [float(x) for x in q_bh]
            d = len(q_bh)
            dv = len(v_pool[0][0][h])
            if n == 0:                                # nothing to attend to
                heads.append([0.0] * dv)
                continue
            where = [(table[t // block_size], t % block_size) for t in range(n)]
            scores = [sum(a * float(c) for a, c in zip(q_bh, k_pool[blk][slot][h])) / math.sqrt(d)
                      for blk, slot in where]
            top = max(scores)
            e = [math.exp(s) for s in scores]  # BUG(softmax-overflow): no max subtracted
            total = sum(e)
            heads.append([sum(w * float(v_pool[blk][slot][h][c]) for w, (blk, slot) in zip(e, where)) / total
                          for c in range(dv)])
        out.append(heads)
    return out
