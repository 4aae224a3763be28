"""A correct attention-backward solution written unlike the reference: einsum throughout,
rowsum(P ⊙ dP) taken as rowsum(dout ⊙ out) (the FlashAttention identity), masks via np.where."""
import numpy as np


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.array(a, dtype=float) for a in (q, k, v, dout))
    c = 1 / np.sqrt(q.shape[-1])
    s = np.einsum("bhtd,bhsd->bhts", q, k) * c
    ok = np.ones(s.shape, bool) if mask is None else np.broadcast_to(np.array(mask, bool)[:, None], s.shape)
    m = np.max(np.where(ok, s, -np.inf), axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(ok, np.exp(np.where(ok, s - m, 0.0)), 0.0)
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z > 0, z, 1.0)
    out = np.einsum("bhts,bhsd->bhtd", p, v)
    dp = np.einsum("bhtd,bhsd->bhts", dout, v)
    ds = p * (dp - np.sum(dout * out, axis=-1, keepdims=True))
    return (np.einsum("bhts,bhsd->bhtd", ds, k) * c, np.einsum("bhts,bhtd->bhsd", ds, q) * c,
            np.einsum("bhts,bhtd->bhsd", p, dout))
