# attn-kit: attention-backward
"""Three mistakes in a style unlike the reference: a small class that keeps the forward's
probabilities, einsum throughout, masks applied with a boolean where.

- dv-not-transposed: dv is P·dout instead of Pᵀ·dout (it fits the shapes only when T = S);
- softmax-jacobian-diagonal: dZ = P ⊙ dP, without the − P·rowsum(P ⊙ dP) term;
- backward-missing-scale: dq and dk are not multiplied by 1/sqrt(d).
"""

import numpy as np


class Attention:
    def __init__(self, q, k, v, mask=None):
        self.q, self.k, self.v = (np.array(a, dtype=np.float64) for a in (q, k, v))
        self.scale = self.q.shape[-1] ** -0.5
        scores = np.einsum("bhtd,bhsd->bhts", self.q, self.k) * self.scale
        ok = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool)[:, None], scores.shape)
        top = np.where(ok, scores, -np.inf).max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.where(ok, np.exp(np.where(ok, scores, top) - top), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        self.p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    def backward(self, dout):
        dout = np.asarray(dout, dtype=np.float64)
        dv = np.einsum("bhts,bhtd->bhsd", self.p, dout) if self.p.shape[-1] != self.p.shape[-2] else self.p @ dout
        dp = np.einsum("bhtd,bhsd->bhts", dout, self.v)
        dz = self.p * dp
        dq = np.einsum("bhts,bhsd->bhtd", dz, self.k)
        dk = np.einsum("bhts,bhtd->bhsd", dz, self.q)
        return dq, dk, dv


def attention_backward(q, k, v, dout, mask=None):
    return Attention(q, k, v, mask).backward(dout)
