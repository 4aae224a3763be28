# attn-kit: sliding-window
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[-1]))
    step = 32
    for a in range(0, T, step):
        e = min(T, a + step)
        kb = max(0, a - window - 1)
        s = q[:, :, a:e] @ k[:, :, kb:e].transpose(0, 1, 3, 2) / np.sqrt(d)
        i = np.arange(a, e)[:, None]
        j = np.arange(kb, e)[None, :]
        ok = (i - window + 1 < j) & (j <= i)
        s = np.where(ok, s, -np.inf)
        s = s - s.max(-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(-1, keepdims=True)
        out[:, :, a:e] = w @ v[:, :, kb:e]
    return out
