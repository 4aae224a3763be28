# attn-kit: mha-screen
"""A half-fix: `stable_softmax` was fixed to give a fully blocked row zeros, but
`multi_head_attention` still does its own softmax over scores filled with -1e9, so its
fully blocked rows come out uniform (blocked-row-uniform, in the layer only)."""
import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=np.float64)
    if allowed is None:
        allowed = np.ones(s.shape, dtype=bool)
    allowed = np.broadcast_to(np.asarray(allowed, dtype=bool), s.shape)
    top = np.where(allowed, s, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, s, 0.0) - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0.0, 1.0, total)


def causal_mask(B, T):
    return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(np.arange(T).reshape(1, 1, T) < n, (n.shape[0], T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError(f"D={D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads

    def project(w, b):
        y = x @ np.asarray(params[w], dtype=np.float64)
        if params.get(b) is not None:
            y = y + np.asarray(params[b], dtype=np.float64)
        return y

    def heads(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = heads(project("Wq", "bq")), heads(project("Wk", "bk")), heads(project("Wv", "bv"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool)[:, None], scores, -1e9)  # still the -1e9 fill here
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = out @ np.asarray(params["Wo"], dtype=np.float64)
    if params.get("bo") is not None:
        out = out + np.asarray(params["bo"], dtype=np.float64)
    return (out, weights) if return_weights else out
