# attn-kit: mha-screen
# locate corpus: bases/lists_compact.py with no-scaling
"""Locate corpus base: plain lists, comprehensions."""
import math


def _rows(v):
    return v.tolist() if hasattr(v, "tolist") else v


def stable_softmax(scores, allowed=None):
    scores = [float(s) for s in _rows(scores)]
    allowed = [True] * len(scores) if allowed is None else [bool(a) for a in _rows(allowed)]
    kept = [s for s, a in zip(scores, allowed) if a]
    if not kept:
        return [0.0 for _ in scores]
    m = max(kept)
    e = [math.exp(s - m) if a else 0.0 for s, a in zip(scores, allowed)]
    z = sum(e)
    return [t / z for t in e]


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in _rows(lengths)]


def matvec(row, W, bias):
    out = [sum(row[i] * W[i][j] for i in range(len(row))) for j in range(len(W[0]))]
    return out if bias is None else [o + float(c) for o, c in zip(out, _rows(bias))]


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = [[[float(v) for v in t] for t in seq] for seq in _rows(x)]
    P = {k: (None if v is None else _rows(v)) for k, v in params.items()}
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError("num_heads must divide D")
    hd = D // num_heads
    M = None if mask is None else _rows(mask)
    outs, all_w = [], []
    for b in range(B):
        q = [matvec(t, P["Wq"], P.get("bq")) for t in x[b]]
        k = [matvec(t, P["Wk"], P.get("bk")) for t in x[b]]
        v = [matvec(t, P["Wv"], P.get("bv")) for t in x[b]]
        ctx = [[0.0] * D for _ in range(T)]
        ws = []
        for h in range(num_heads):
            lo = h * hd
            hi = lo + hd
            wh = []
            for i in range(T):
                s = [sum(q[i][c] * k[j][c] for c in range(lo, hi)) for j in range(T)]
                w = stable_softmax(s, None if M is None else M[b][i])
                wh.append(w)
                for c in range(lo, hi):
                    ctx[i][c] = sum(w[j] * v[j][c] for j in range(T))
            ws.append(wh)
        outs.append([matvec(t, P["Wo"], P.get("bo")) for t in ctx])
        all_w.append(ws)
    return (outs, all_w) if return_weights else outs
