# attn-kit: kv-cache
"""Reference solution for kv-cache, with NumPy: one decoding step of causal multi-head attention.

The cache is the pair (keys, values), each B×t×D: the projected keys and values of the t tokens
seen so far (2·B·t·D numbers), heads side by side exactly as the projection produced them. A
step projects only the new token, appends its key and value, and lets its query attend to every
cached token, itself included.

Cost of one step, per sequence: O(D²) for the four projections of the one new token (q, k, v
and the output, each a D-vector times a D×D matrix) plus O(t·D) to score and average the t
cached tokens. Rerunning the whole layer instead costs O(t·D²) for the projections plus
O(t²·D) for the attention.

For clarity this reference appends with np.concatenate, which copies the cache each step:
O(t·D) more per step, the same order as the attention reads, so the order does not change. A
server preallocates buffers and keeps an int "length" instead (the statement allows that form).
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
    weights = _softmax(scores)
    heads = np.einsum("bhj,bhjd->bhd", weights, v)                     # B×H×hd
    out = _project(heads.reshape(B, D), params, "Wo", "bo")
    return out, (keys, values)
