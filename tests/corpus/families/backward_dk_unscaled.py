# attn-kit: attention-backward
import numpy as np


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.asarray(a, dtype=float) for a in (q, k, v, dout))
    c = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * c
    if mask is not None:
        ok = np.asarray(mask, dtype=bool)[:, None]
        s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(-1, keepdims=True)
    P = e / np.where(z > 0, z, 1.0)
    dv = np.swapaxes(P, -1, -2) @ dout
    dP = dout @ np.swapaxes(v, -1, -2)
    dS = P * (dP - (P * dP).sum(-1, keepdims=True))
    dq = dS @ k * c
    dk = np.swapaxes(dS, -1, -2) @ q
    return dq, dk, dv
