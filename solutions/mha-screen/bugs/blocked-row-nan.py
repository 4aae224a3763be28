# attn-kit: mha-screen
"""Known bug `blocked-row-nan`: blocked scores become -inf, so an empty row is NaN.

The reference solution with exactly one change, marked BUG(blocked-row-nan).
"""
import numpy as np


def _masked_softmax(scores, allowed):
    """Softmax over the last axis, restricted to allowed entries; empty rows give zeros."""
    s = np.asarray(scores, dtype=np.float64)
    ok = np.broadcast_to(np.asarray(allowed, dtype=bool), s.shape)
    s = np.where(ok, s, -np.inf)  # BUG(blocked-row-nan): -inf fill; an empty row computes -inf - (-inf)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)
    # lists: any_ok = any(allowed)
    any_ok = ok.any(axis=-1, keepdims=True)
    # lists: m = max(s for s, a in zip(scores, allowed) if a)   -- blocked entries never count
    m = np.max(np.where(ok, s, -np.inf), axis=-1, keepdims=True)
    m = np.where(any_ok, m, 0.0)
    # lists: e = [math.exp(s - m) if a else 0.0 for s, a in zip(scores, allowed)]
    e = np.where(ok, np.exp(np.where(ok, s - m, 0.0)), 0.0)
    # lists: total = sum(e); return [v / total for v in e] if total > 0 else [0.0] * len(e)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    ok = np.ones(s.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    return _masked_softmax(s, ok)


def causal_mask(B, T):
    # lists: [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]
    return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (B, T, T)).copy()


def padding_mask(lengths, T):
    # lists: [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]
    n = np.asarray(lengths, dtype=np.int64).reshape(-1, 1, 1)
    keys = np.arange(T).reshape(1, 1, T)
    return np.broadcast_to(keys < n, (n.shape[0], T, T)).copy()


def _project(x, params, w, b):
    # lists: [[sum(row[i] * W[i][j] for i in range(D_in)) + bias[j] for j in range(D_out)] for row in x]
    y = x @ np.asarray(params[w], dtype=np.float64)
    if params.get(b) is not None:
        y = y + np.asarray(params[b], dtype=np.float64)
    return y


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads

    def split_heads(y):
        # B×T×D -> B×T×H×hd (head h = columns h*hd:(h+1)*hd) -> B×H×T×hd
        # lists: y[b][t][h*hd:(h+1)*hd] is head h's vector for token t
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q = split_heads(_project(x, params, "Wq", "bq"))
    k = split_heads(_project(x, params, "Wk", "bk"))
    v = split_heads(_project(x, params, "Wv", "bv"))
    # lists: scores[i][j] = dot(q[i], k[j]) / math.sqrt(hd), for each batch and head
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is None:
        allowed = np.ones((B, 1, T, T), dtype=bool)
    else:
        allowed = np.asarray(mask, dtype=bool)[:, None, :, :]   # one mask shared by all heads
    weights = _masked_softmax(scores, allowed)                   # B×H×T×T, each row over keys
    # lists: head_out[i] = [sum(w[i][j] * v[j][c] for j in range(T)) for c in range(hd)]
    heads = weights @ v                                          # B×H×T×hd
    # put the heads back side by side: B×H×T×hd -> B×T×H×hd -> B×T×D
    concat = heads.transpose(0, 2, 1, 3).reshape(B, T, D)
    out = _project(concat, params, "Wo", "bo")
    return (out, weights) if return_weights else out
