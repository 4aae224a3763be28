# attn-kit: sliding-window
"""A correct sliding-window solution with an online softmax: query i folds in its keys one
offset at a time (key i, then i-1, ... i-window+1), keeping a running max, sum and accumulator
for every query at once. Nothing of T×T size exists; memory is O(B·H·T·d)."""
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    B, H, T, d = q.shape
    m = np.full((B, H, T), -np.inf)          # running max (the online softmax starts at -inf)
    total = np.zeros((B, H, T))
    acc = np.zeros((B, H, T, v.shape[-1]))
    for offset in range(min(window, T)):
        rows = slice(offset, T)                 # queries i >= offset have key i - offset
        keys = slice(0, T - offset)
        s = np.einsum("bhid,bhid->bhi", q[:, :, rows], k[:, :, keys]) / np.sqrt(d)
        m_new = np.maximum(m[:, :, rows], s)
        alpha = np.exp(m[:, :, rows] - m_new)
        p = np.exp(s - m_new)
        total[:, :, rows] = total[:, :, rows] * alpha + p
        acc[:, :, rows] = acc[:, :, rows] * alpha[..., None] + p[..., None] * v[:, :, keys]
        m[:, :, rows] = m_new
    return acc / total[..., None]
