# attn-kit: attention-backward
"""A correct attention backward whose forward statistics come from an online softmax over key
blocks (the FlashAttention way: a running max m and sum l per query, then P = exp(S - m) / l),
followed by the textbook backward."""
import numpy as np


def attention_backward(q, k, v, dout, mask=None, block=2):
    q, k, v, dout = (np.asarray(a, dtype=np.float64) for a in (q, k, v, dout))
    B, H, T, d = q.shape
    S = k.shape[2]
    scale = 1.0 / np.sqrt(d)
    allowed = np.ones((B, 1, T, S), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)[:, None]
    scores = np.where(allowed, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    m = np.full((B, H, T), -np.inf)             # running max (starts at -inf)
    l = np.zeros((B, H, T))
    for j in range(0, S, block):
        s = scores[..., j:j + block]
        m_new = np.maximum(m, s.max(axis=-1))
        safe = np.where(np.isfinite(m_new), m_new, 0.0)
        l = l * np.exp(np.where(np.isfinite(m), m - safe, -np.inf)) + np.exp(s - safe[..., None]).sum(axis=-1)
        m = m_new
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        P = np.where(l[..., None] > 0, np.exp(scores - safe[..., None]) / l[..., None], 0.0)
    dv = np.swapaxes(P, -1, -2) @ dout
    dP = dout @ np.swapaxes(v, -1, -2)
    dS = P * (dP - (P * dP).sum(axis=-1, keepdims=True))
    return dS @ k * scale, np.swapaxes(dS, -1, -2) @ q * scale, dv
