# attn-kit: sliding-window
"""A correct sliding-window solution in float32: one query at a time over its own window slice,
so nothing of T×T size exists. It must pass: the statement does not ask for float64."""
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    q = np.asarray(q, dtype=np.float32)
    k = np.asarray(k, dtype=np.float32)
    v = np.asarray(v, dtype=np.float32)
    B, H, T, d = q.shape
    out = np.empty((B, H, T, v.shape[-1]), dtype=np.float32)
    scale = np.float32(d) ** np.float32(-0.5)
    for i in range(T):
        lo = max(0, i - window + 1)
        s = np.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, lo:i + 1]) * scale
        s = s - s.max(axis=-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(axis=-1, keepdims=True)
        out[:, :, i] = np.einsum("bhj,bhjd->bhd", w, v[:, :, lo:i + 1])
    return out
