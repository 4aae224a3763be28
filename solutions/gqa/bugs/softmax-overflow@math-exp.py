# attn-kit: gqa
"""Known bug `softmax-overflow`: math.exp of the raw scores (OverflowError at large scores).

The reference solution with exactly one change, marked BUG(softmax-overflow).
"""
import math


def _matmul(rows, W):
    cols = list(zip(*W))
    return [[sum(a * b for a, b in zip(row, col)) for col in cols] for row in rows]


def _project(rows, params, w, b):
    out = _matmul(rows, params[w])
    bias = params.get(b)
    return out if bias is None else [[v + bv for v, bv in zip(row, bias)] for row in out]


def _softmax(scores, allowed):
    kept = [s for s, ok in zip(scores, allowed) if ok]
    if not kept:
        return [0.0] * len(scores)
    m = max(kept)
    e = [math.exp(s) if ok else 0.0 for s, ok in zip(scores, allowed)]  # BUG(softmax-overflow): no max subtracted
    total = sum(e)
    return [v / total for v in e]


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    hd = D // num_heads
    group = num_heads // num_kv_heads
    out, all_weights = [], []
    for b in range(B):
        rows = [[float(v) for v in tok] for tok in x[b]]
        q = _project(rows, params, "Wq", "bq")          # T×D
        k = _project(rows, params, "Wk", "bk")          # T×(num_kv_heads·hd)
        v = _project(rows, params, "Wv", "bv")
        concat = [[0.0] * D for _ in range(T)]
        batch_weights = []
        for h in range(num_heads):
            g = h // group                              # the key/value head this query head reads
            q_cols, kv_cols = range(h * hd, (h + 1) * hd), range(g * hd, (g + 1) * hd)
            head_weights = []
            for i in range(T):
                scores = [sum(q[i][a] * k[j][c] for a, c in zip(q_cols, kv_cols)) / math.sqrt(hd)
                          for j in range(T)]
                allowed = [True] * T if mask is None else [bool(a) for a in mask[b][i]]
                w = _softmax(scores, allowed)
                head_weights.append(w)
                for a, c in zip(q_cols, kv_cols):
                    concat[i][a] = sum(w[j] * v[j][c] for j in range(T))
            batch_weights.append(head_weights)
        out.append(_project(concat, params, "Wo", "bo"))
        all_weights.append(batch_weights)
    return (out, all_weights) if return_weights else out
