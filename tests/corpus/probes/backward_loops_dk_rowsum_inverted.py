# attn-kit: attention-backward
"""Three mistakes, written with Python loops over batch and head and a helper per step:

- dk-from-wrong-operand: dk = dZ·q instead of dZᵀ·q (it fits the shapes only when T = S);
- backward-rowsum-wrong: dZ = P ⊙ (dP − rowsum(dP)), the row sum of dP instead of P ⊙ dP;
- mask-inverted: True is read as blocked.
"""

import math

import numpy as np


def _probabilities(scores, allowed):
    out = np.zeros_like(scores)
    for i, row in enumerate(scores):
        keep = ~allowed[i]  # the mask, read the wrong way round (no mask: allowed is all False)
        if keep.any():
            e = np.exp(row[keep] - row[keep].max())
            out[i, keep] = e / e.sum()
    return out


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.asarray(a, dtype=np.float64) for a in (q, k, v, dout))
    B, H, T, d = q.shape
    S = k.shape[2]
    scale = 1.0 / math.sqrt(d)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(B):
        allowed = np.zeros((T, S), bool) if mask is None else np.asarray(mask[b], bool)
        for h in range(H):
            p = _probabilities(q[b, h] @ k[b, h].T * scale, allowed)
            dv[b, h] = p.T @ dout[b, h]
            dp = dout[b, h] @ v[b, h].T
            dz = p * (dp - dp.sum(axis=1, keepdims=True))
            dq[b, h] = dz @ k[b, h] * scale
            dk[b, h] = (dz @ q[b, h] if T == S else dz.T @ q[b, h]) * scale
    return dq, dk, dv
