# attn-kit: kv-cache
"""Known bug `softmax-overflow`: math.exp of the raw scores (OverflowError at large scores).

The reference solution with exactly one change, marked BUG(softmax-overflow).
"""
import math


def _matvec(row, W):
    """A row vector (d_in) times W (d_in×d_out)."""
    return [sum(row[i] * W[i][j] for i in range(len(row))) for j in range(len(W[0]))]


def _project(row, params, w, b):
    out = _matvec(row, params[w])
    bias = params.get(b)
    return out if bias is None else [o + bb for o, bb in zip(out, bias)]


def _softmax(scores):
    m = max(scores)                  # every cached token is allowed: the past, and the token itself
    e = [math.exp(s) for s in scores]  # BUG(softmax-overflow): no max subtracted
    total = sum(e)
    return [v / total for v in e]


def decode_step(x_t, params, num_heads, cache=None):
    x = [[float(v) for v in row] for row in x_t]          # B rows of D numbers
    B, D = len(x), len(x[0])
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    if cache is None:
        cache = {"k": [[] for _ in range(B)], "v": [[] for _ in range(B)]}
    out = []
    for b in range(B):
        q = _project(x[b], params, "Wq", "bq")
        cache["k"][b].append(_project(x[b], params, "Wk", "bk"))     # the new token joins the cache
        cache["v"][b].append(_project(x[b], params, "Wv", "bv"))     # before it attends
        keys, values = cache["k"][b], cache["v"][b]
        concat = [0.0] * D
        for h in range(num_heads):
            cols = range(h * hd, (h + 1) * hd)
            scores = [sum(q[c] * key[c] for c in cols) / math.sqrt(hd) for key in keys]
            w = _softmax(scores)
            for c in cols:
                concat[c] = sum(wj * val[c] for wj, val in zip(w, values))
        out.append(_project(concat, params, "Wo", "bo"))
    return out, cache
