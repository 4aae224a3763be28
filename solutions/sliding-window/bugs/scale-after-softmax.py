# attn-kit: sliding-window
"""Known bug `scale-after-softmax`: the scores go into the softmax unscaled, and 1/sqrt(d) multiplies the weights afterwards, so the weights are too sharp and do not sum to 1.

The reference solution with exactly one change, marked BUG(scale-after-softmax).
"""
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError(f"window must be at least 1 (a query always sees itself), got {window}")
    q = np.asarray(q, dtype=np.float64)               # B×H×T×d (no copy when already float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    B, H, T, d = q.shape
    scale = 1.0 / np.sqrt(d)
    back = window - 1                                 # keys before the query that the window holds
    ahead = 0                                         # keys after the query: none, attention is causal
    c = min(T, max(window, 16))                       # queries per chunk
    out = np.empty((B, H, T, v.shape[-1]))
    for s in range(0, T, c):
        e = min(s + c, T)
        ks, ke = max(0, s - back), min(T, e + ahead)  # the only keys this chunk can see
        scores = q[:, :, s:e] @ k[:, :, ks:ke].transpose(0, 1, 3, 2)     # B×H×(e-s)×(ke-ks), fresh
        # BUG(scale-after-softmax): the scores are not scaled here ...
        i = np.arange(s, e)[:, None]
        j = np.arange(ks, ke)[None, :]
        band = (j <= i + ahead) & (j >= i - back)
        np.copyto(scores, -np.inf, where=~band)       # every row keeps at least its own key
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        scores *= scale  # BUG(scale-after-softmax): ... but the weights are, after the softmax
        out[:, :, s:e] = scores @ v[:, :, ks:ke]
    return out
