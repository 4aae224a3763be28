# attn-kit: attention-backward
# traced-locate corpus: bases/numpy_backward_closure.py with backward-rowsum-wrong
"""Base of the traced-locate corpus: the attention gradients with einsum and a closure."""
import numpy as np


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.asarray(a, dtype=np.float64) for a in (q, k, v, dout))
    c = 1.0 / np.sqrt(q.shape[-1])

    def probs():
        z = np.einsum("bhtd,bhsd->bhts", q, k) * c
        if mask is not None:
            z = np.where(np.asarray(mask, dtype=bool)[:, None], z, -np.inf)
        top = z.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.exp(z - top)
        n = e.sum(axis=-1, keepdims=True)
        return e / np.where(n > 0, n, 1.0)

    p = probs()
    out = np.einsum("bhts,bhse->bhte", p, v)
    g_v = np.einsum("bhts,bhte->bhse", p, dout)
    g_p = np.einsum("bhte,bhse->bhts", dout, v)
    delta = g_p.sum(axis=-1, keepdims=True)
    g_z = p * (g_p - delta)
    g_q = np.einsum("bhts,bhsd->bhtd", g_z, k) * c
    g_k = np.einsum("bhts,bhtd->bhsd", g_z, q) * c
    return g_q, g_k, g_v
