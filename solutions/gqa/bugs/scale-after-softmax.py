# attn-kit: gqa
"""Known bug `scale-after-softmax`: the scores go into the softmax unscaled, and 1/sqrt(hd) multiplies the weights afterwards, so the weights are too sharp and do not sum to 1.

The reference solution with exactly one change, marked BUG(scale-after-softmax).
"""
import numpy as np


def _project(x, params, w, b):
    y = x @ np.asarray(params[w], dtype=np.float64)
    if params.get(b) is not None:
        y = y + np.asarray(params[b], dtype=np.float64)
    return y


def _masked_softmax(scores, allowed):
    """Softmax over the last axis, restricted to allowed entries; rows with none allowed give zeros."""
    ok = np.broadcast_to(allowed, scores.shape)
    m = np.max(np.where(ok, scores, -np.inf), axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)                 # an empty row: any finite shift will do
    e = np.where(ok, np.exp(np.where(ok, scores - m, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    hd = D // num_heads
    group = num_heads // num_kv_heads

    def split_heads(y, heads):
        return y.reshape(B, T, heads, hd).transpose(0, 2, 1, 3)     # B×heads×T×hd

    q = split_heads(_project(x, params, "Wq", "bq"), num_heads)
    k = split_heads(_project(x, params, "Wk", "bk"), num_kv_heads)  # Wk is D×(num_kv_heads·hd)
    v = split_heads(_project(x, params, "Wv", "bv"), num_kv_heads)
    kv_head = np.arange(num_heads) // group          # query head h reads key/value head h // group
    k, v = k[:, kv_head], v[:, kv_head]              # B×H×T×hd: each K/V head repeated for its group
    scores = q @ k.transpose(0, 1, 3, 2)  # BUG(scale-after-softmax): not scaled here ...
    allowed = np.ones((B, 1, T, T), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)[:, None]
    weights = _masked_softmax(scores, allowed) / np.sqrt(hd)  # BUG(scale-after-softmax): ... but after the softmax
    heads = weights @ v
    out = _project(heads.transpose(0, 2, 1, 3).reshape(B, T, D), params, "Wo", "bo")
    return (out, weights) if return_weights else out
