# attn-kit: attention-backward
"""Correct, in a style unlike the reference: the backward written as a tape of small steps, each
with its own vector-Jacobian product (the softmax's as dZ = P ⊙ dP − P ⊙ (P·dP summed per row)),
plain Python lists of steps, NumPy float64."""

import numpy as np


def _softmax(z, ok):
    z = np.where(ok, z, -np.inf)
    top = z.max(axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.where(ok, np.exp(z - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.array(a, dtype=np.float64) for a in (q, k, v, dout))
    ok = np.ones(q.shape[:-1] + k.shape[-2:-1], bool) if mask is None else np.broadcast_to(np.asarray(mask, bool)[:, None], q.shape[:-1] + k.shape[-2:-1])
    c = 1.0 / np.sqrt(q.shape[-1])
    z = np.matmul(q, np.swapaxes(k, 2, 3)) * c
    p = _softmax(z, ok)
    tape = [
        ("v", lambda g: np.matmul(np.swapaxes(p, 2, 3), g)),
        ("p", lambda g: np.matmul(g, np.swapaxes(v, 2, 3))),
    ]
    grads = {name: step(dout) for name, step in tape}
    dp = grads["p"]
    dz = p * dp - p * np.sum(p * dp, axis=-1, keepdims=True)
    dq = np.matmul(dz, k) * c
    dk = np.matmul(np.swapaxes(dz, 2, 3), q) * c
    return dq, dk, grads["v"]
