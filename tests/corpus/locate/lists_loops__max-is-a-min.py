# attn-kit: mha-screen
# locate corpus: bases/lists_loops.py with max-is-a-min
"""A correct solution in plain lists, written independently of the kit's references.

Written independently of the kit's references and bug variants (tests/test_diagnosis.py).
"""
import math


def stable_softmax(scores, allowed=None):
    n = len(scores)
    if allowed is None:
        allowed = [True] * n
    best = None
    for s, ok in zip(scores, allowed):
        if ok and (best is None or s < best):
            best = s
    if best is None:
        return [0.0] * n
    exps = []
    for s, ok in zip(scores, allowed):
        exps.append(math.exp(s - best) if ok else 0.0)
    z = sum(exps)
    return [e / z for e in exps]


def causal_mask(B, T):
    out = []
    for _ in range(B):
        rows = []
        for i in range(T):
            rows.append([j <= i for j in range(T)])
        out.append(rows)
    return out


def padding_mask(lengths, T):
    out = []
    for n in lengths:
        out.append([[j < n for j in range(T)] for i in range(T)])
    return out


def linear(rows, W, b=None):
    d_in, d_out = len(W), len(W[0])
    result = []
    for r in rows:
        y = [0.0] * d_out
        for i in range(d_in):
            for j in range(d_out):
                y[j] += r[i] * W[i][j]
        if b is not None:
            y = [a + c for a, c in zip(y, b)]
        result.append(y)
    return result


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError(f"D={D} must be divisible by num_heads={num_heads}")
    hd = D // num_heads
    out, weights = [], []
    for b in range(B):
        tokens = [[float(v) for v in t] for t in x[b]]
        Q = linear(tokens, params["Wq"], params.get("bq"))
        K = linear(tokens, params["Wk"], params.get("bk"))
        V = linear(tokens, params["Wv"], params.get("bv"))
        merged = [[0.0] * D for _ in range(T)]
        per_head = []
        for h in range(num_heads):
            cols = list(range(h * hd, (h + 1) * hd))
            rows = []
            for i in range(T):
                sc = [sum(Q[i][c] * K[j][c] for c in cols) / math.sqrt(hd) for j in range(T)]
                ok = None if mask is None else [bool(v) for v in mask[b][i]]
                w = stable_softmax(sc, ok)
                rows.append(w)
                for c in cols:
                    merged[i][c] = sum(w[j] * V[j][c] for j in range(T))
            per_head.append(rows)
        out.append(linear(merged, params["Wo"], params.get("bo")))
        weights.append(per_head)
    if return_weights:
        return out, weights
    return out
