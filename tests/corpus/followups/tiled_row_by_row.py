# attn-kit: tiled-softmax
"""A correct but slow tiled-softmax solution: one query row at a time, each key block of that row
folded into a scalar running max and sum. O(T·S) work in T·ceil(S / block_size) small NumPy steps;
it never holds more than one block of one row."""
import math

import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    T, d = q.shape
    S, dv = v.shape
    out = np.zeros((T, dv))
    scale = 1.0 / math.sqrt(d)
    for i in range(T):
        m, total, acc = -math.inf, 0.0, np.zeros(dv)
        for j in range(0, S, block_size):
            s = (k[j:j + block_size] @ q[i]) * scale
            if mask is not None:
                keep = np.asarray(mask[i][j:j + block_size], dtype=bool)
                s, vals = s[keep], v[j:j + block_size][keep]
            else:
                vals = v[j:j + block_size]
            if s.size == 0:
                continue
            m_new = max(m, float(s.max()))
            alpha = math.exp(m - m_new) if m != -math.inf else 0.0
            p = np.exp(s - m_new)
            total = total * alpha + float(p.sum())
            acc = acc * alpha + p @ vals
            m = m_new
        if total > 0:
            out[i] = acc / total
    return out
