# attn-kit: sliding-window
"""Correct, in a style unlike the reference: one query at a time over its own window of keys,
lists of rows and a running max."""

import math

import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    q, k, v = (np.array(a, dtype=np.float64) for a in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[-1]))
    for b in range(B):
        for h in range(H):
            for i in range(T):
                keys = range(max(0, i - window + 1), i + 1)
                scores = [float(q[b, h, i] @ k[b, h, j]) / math.sqrt(d) for j in keys]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = sum(weights)
                out[b, h, i] = sum(w / total * v[b, h, j] for w, j in zip(weights, keys))
    return out
