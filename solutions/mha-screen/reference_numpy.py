# attn-kit: mha-screen
"""Reference solution for mha-screen, vectorised with NumPy.

Each step carries a comment with the plain-list version of the same line, so this file reads
side by side with reference_lists.py. Conventions (the statement's): True = allowed, head h owns
the projected columns h*hd:(h+1)*hd, a projection is x @ W + b.

It computes in the input's precision (float32 stays float32; lists become float64) and works in
place on the arrays it creates itself, so the T×T scores are written once and reused for the
weights: that keeps it within reach of a framework's attention on the CPU.
"""
import numpy as np


def _masked_softmax(scores, allowed=None):
    """Softmax over the last axis, restricted to allowed entries; a row with none allowed gives zeros.

    Works in place on `scores`, a fresh floating array the caller owns.
    """
    s = scores
    if allowed is not None:
        # blocked entries become -inf: they never win the max, and exp(-inf) is exactly 0
        np.copyto(s, -np.inf, where=~np.broadcast_to(np.asarray(allowed, dtype=bool), s.shape))
    # lists: m = max(s for s, a in zip(scores, allowed) if a)   -- blocked entries never count
    m = s.max(axis=-1, keepdims=True)
    # lists: if not kept: return [0.0] * len(scores)   -- an empty row: any finite shift will do
    m[np.isneginf(m)] = 0.0
    # lists: e = [math.exp(s - m) if a else 0.0 for s, a in zip(scores, allowed)]
    s -= m
    np.exp(s, out=s)
    # lists: total = sum(e); return [v / total for v in e]   -- an empty row keeps its zeros
    total = s.sum(axis=-1, keepdims=True)
    total[total == 0.0] = 1.0
    s /= total
    return s


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=np.float64)          # a copy: the caller's scores stay untouched
    return _masked_softmax(s, allowed)


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
    y = x @ np.asarray(params[w], dtype=x.dtype)
    if params.get(b) is not None:
        y += np.asarray(params[b], dtype=x.dtype)
    return y


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x)
    x = x.astype(x.dtype if x.dtype in (np.float32, np.float64) else np.float64, copy=False)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads

    def split_heads(y):
        # B×T×D -> B×T×H×hd (head h = columns h*hd:(h+1)*hd) -> B×H×T×hd
        # lists: y[b][t][h*hd:(h+1)*hd] is head h's vector for token t
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    scale = 1.0 / np.sqrt(hd)
    q = split_heads(_project(x, params, "Wq", "bq")) * x.dtype.type(scale)
    k = split_heads(_project(x, params, "Wk", "bk"))
    v = split_heads(_project(x, params, "Wv", "bv"))
    # lists: scores[i][j] = dot(q[i], k[j]) / math.sqrt(hd), for each batch and head
    scores = q @ k.transpose(0, 1, 3, 2)
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None, :, :]   # shared by all heads
    weights = _masked_softmax(scores, allowed)                   # B×H×T×T, each row over keys
    # lists: head_out[i] = [sum(w[i][j] * v[j][c] for j in range(T)) for c in range(hd)]
    heads = weights @ v                                          # B×H×T×hd
    # put the heads back side by side: B×H×T×hd -> B×T×H×hd -> B×T×D
    concat = heads.transpose(0, 2, 1, 3).reshape(B, T, D)
    out = _project(concat, params, "Wo", "bo")
    return (out, weights) if return_weights else out
