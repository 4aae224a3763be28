# attn-kit: kv-cache
"""Known bug `softmax-wrong-axis`: the softmax is taken over the query axis, which has length 1 in single-query decoding, so every weight is 1 and the output sums the values.

The reference solution with exactly one change, marked BUG(softmax-wrong-axis).
"""
import numpy as np


def _project(x, params, w, b):
    y = x @ np.asarray(params[w], dtype=np.float64)
    if params.get(b) is not None:
        y = y + np.asarray(params[b], dtype=np.float64)
    return y


def _softmax(scores):
    """Softmax over the last axis (no mask: every cached token is in the past or is the token itself)."""
    m = np.max(scores, axis=-1, keepdims=True, initial=-np.inf)   # an empty axis gives -inf, not an error
    e = np.exp(scores - m)
    return e / e.sum(axis=-1, keepdims=True)


def decode_step(x_t, params, num_heads, cache=None):
    x = np.asarray(x_t, dtype=np.float64)                  # B×D: one new token per sequence
    B, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    q = _project(x, params, "Wq", "bq").reshape(B, num_heads, hd)      # head h = columns h*hd:(h+1)*hd
    k_new = _project(x, params, "Wk", "bk")[:, None, :]                # B×1×D
    v_new = _project(x, params, "Wv", "bv")[:, None, :]
    if cache is None:
        keys, values = k_new, v_new
    else:
        past_k, past_v = (np.asarray(c, dtype=np.float64) for c in cache)
        keys = np.concatenate([past_k, k_new], axis=1)                 # B×(t+1)×D: the new token included
        values = np.concatenate([past_v, v_new], axis=1)
    n = keys.shape[1]
    k = keys.reshape(B, n, num_heads, hd).transpose(0, 2, 1, 3)        # B×H×n×hd
    v = values.reshape(B, n, num_heads, hd).transpose(0, 2, 1, 3)
    scores = np.einsum("bhd,bhjd->bhj", q, k) / np.sqrt(hd)            # one row of n scores per head
    weights = _softmax(scores[..., None])[..., 0]  # BUG(softmax-wrong-axis): over the one query (B×H×n×1), not the n keys
    heads = np.einsum("bhj,bhjd->bhd", weights, v)                     # B×H×hd
    out = _project(heads.reshape(B, D), params, "Wo", "bo")
    return out, (keys, values)
