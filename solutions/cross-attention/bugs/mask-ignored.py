# attn-kit: cross-attention
"""Known bug `mask-ignored`: the mask argument is never applied, so every query attends to every key of the context.

The reference solution with exactly one change, marked BUG(mask-ignored).
"""
import numpy as np


def _project(x, params, w, b):
    y = x @ np.asarray(params[w], dtype=np.float64)
    if params.get(b) is not None:
        y = y + np.asarray(params[b], dtype=np.float64)
    return y


def _masked_softmax(scores, allowed):
    """Softmax over the last axis (keys), restricted to allowed entries; empty rows give zeros."""
    ok = np.broadcast_to(allowed, scores.shape)
    m = np.max(np.where(ok, scores, -np.inf), axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(ok, np.exp(np.where(ok, scores - m, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def cross_attention(x, context, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)                # B×T×D: where the queries come from
    context = np.asarray(context, dtype=np.float64)    # B×S×D: where the keys and values come from
    B, T, D = x.shape
    S = context.shape[1]
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads

    def split_heads(y):
        n = y.shape[1]                                  # T for queries, S for keys and values
        return y.reshape(B, n, num_heads, hd).transpose(0, 2, 1, 3)

    q = split_heads(_project(x, params, "Wq", "bq"))          # B×H×T×hd
    k = split_heads(_project(context, params, "Wk", "bk"))    # B×H×S×hd
    v = split_heads(_project(context, params, "Wv", "bv"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)         # B×H×T×S
    allowed = np.ones((B, 1, T, S), dtype=bool)  # BUG(mask-ignored): the mask argument is never applied
    weights = _masked_softmax(scores, allowed)
    heads = weights @ v                                        # B×H×T×hd
    concat = heads.transpose(0, 2, 1, 3).reshape(B, T, D)
    out = _project(concat, params, "Wo", "bo")
    return (out, weights) if return_weights else out
