"""Sliding window written independently that leaves out the query's own key and returns zeros for an empty row. Not derived from the kit's files:
the diagnosis must still name the mistake."""
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window")
    out = np.zeros(q.shape)
    for i in range(q.shape[2]):
        lo = max(0, i - window + 1)
        if lo >= i:
            continue
        s = np.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, lo:i]) / np.sqrt(q.shape[-1])
        w = np.exp(s - s.max(-1, keepdims=True))
        out[:, :, i] = np.einsum("bhj,bhjd->bhd", w / w.sum(-1, keepdims=True), v[:, :, lo:i])
    return out
