"""Attention backward written independently with einsum, without the − rowsum(P ⊙ dP) term. Not derived from the kit's files:
the diagnosis must still name the mistake."""
import numpy as np


def attention_backward(q, k, v, dout, mask=None):
    c = 1 / np.sqrt(q.shape[-1])
    s = np.einsum("bhtd,bhsd->bhts", q, k) * c
    ok = np.ones(s.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool)[:, None], s.shape)
    m = np.max(np.where(ok, s, -np.inf), -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.where(ok, np.exp(np.where(ok, s - m, 0)), 0)
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z > 0, z, 1)
    dp = np.einsum("bhtd,bhsd->bhts", dout, v)
    ds = p * dp                                           # forgot the rowsum term
    return (np.einsum("bhts,bhsd->bhtd", ds, k) * c, np.einsum("bhts,bhtd->bhsd", ds, q) * c,
            np.einsum("bhts,bhtd->bhsd", p, dout))
