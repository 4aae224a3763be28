# attn-kit: mha-screen
import math


def _t(m):
    return [list(col) for col in zip(*m)]


def _linear(rows, W, b):
    W = [list(map(float, r)) for r in W]
    out = []
    for r in rows:
        y = [sum(r[i] * W[i][j] for i in range(len(r))) for j in range(len(W[0]))]
        if b is not None:
            y = [v + float(c) for v, c in zip(y, b)]
        out.append(y)
    return out


def stable_softmax(scores, allowed=None):
    scores = [float(s) for s in scores]
    allowed = [True] * len(scores) if allowed is None else [bool(a) for a in allowed]
    if not any(allowed):
        return [0.0] * len(scores)
    e = [math.exp(s) if a else 0.0 for s, a in zip(scores, allowed)]
    total = sum(e)
    return [v / total for v in e]


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = [[[float(v) for v in row] for row in seq] for seq in x]
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    out, weights = [], []
    for b in range(B):
        q = _linear(x[b], _t(params["Wq"]), params.get("bq"))
        k = _linear(x[b], params["Wk"], params.get("bk"))
        v = _linear(x[b], params["Wv"], params.get("bv"))
        concat = [[0.0] * D for _ in range(T)]
        wb = []
        for h in range(num_heads):
            lo = h * hd
            wh = []
            for i in range(T):
                s = [sum(q[i][lo + c] * k[j][lo + c] for c in range(hd)) / math.sqrt(hd) for j in range(T)]
                allowed = [True] * T if mask is None else [bool(mask[b][i][j]) for j in range(T)]
                w = stable_softmax(s, allowed)
                wh.append(w)
                for c in range(hd):
                    concat[i][lo + c] = sum(w[j] * v[j][lo + c] for j in range(T))
            wb.append(wh)
        out.append(_linear(concat, params["Wo"], params.get("bo")))
        weights.append(wb)
    return (out, weights) if return_weights else out
