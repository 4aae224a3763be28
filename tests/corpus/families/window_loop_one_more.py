# attn-kit: sliding-window
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[-1]))
    for i in range(T):
        lo = max(0, i - window)
        s = np.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, lo:i + 1]) / np.sqrt(d)
        s = s - s.max(-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(-1, keepdims=True)
        out[:, :, i] = np.einsum("bhj,bhjd->bhd", w, v[:, :, lo:i + 1])
    return out
