# attn-kit: mha-screen
"""Divides the scores by the head width, not its square root: 1/sqrt(hd) applied twice, which is
the catalogue's double-scaling (written here as one division by hd)."""
import math


def _plain(v):
    return v.tolist() if hasattr(v, "tolist") else v


def stable_softmax(scores, allowed=None):
    scores = [float(s) for s in _plain(scores)]
    ok = [True] * len(scores) if allowed is None else [bool(a) for a in _plain(allowed)]
    kept = [s for s, a in zip(scores, ok) if a]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    e = [math.exp(s - top) if a else 0.0 for s, a in zip(scores, ok)]
    total = sum(e)
    return [v / total for v in e]


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in _plain(lengths)]


def _linear(rows, W, b):
    W = _plain(W)
    out = []
    for r in rows:
        y = [sum(r[i] * W[i][j] for i in range(len(r))) for j in range(len(W[0]))]
        if b is not None:
            y = [v + float(c) for v, c in zip(y, _plain(b))]
        out.append(y)
    return out


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = [[[float(v) for v in tok] for tok in seq] for seq in _plain(x)]
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError(f"D={D} is not divisible by num_heads={num_heads}")
    H = num_heads
    hd = D // H
    mask = None if mask is None else _plain(mask)
    outs, weights = [], []
    for b in range(B):
        q = _linear(x[b], params["Wq"], params.get("bq"))
        k = _linear(x[b], params["Wk"], params.get("bk"))
        v = _linear(x[b], params["Wv"], params.get("bv"))
        heads_w, concat = [], [[0.0] * D for _ in range(T)]
        for h in range(H):
            cols = range(h * hd, (h + 1) * hd)
            w_h = []
            for i in range(T):
                s = [sum(q[i][c] * k[j][c] for c in cols) / hd for j in range(T)]
                allowed = None if mask is None else [bool(a) for a in mask[b][i]]
                w_h.append(stable_softmax(s, allowed))
            for i in range(T):
                for c in cols:
                    concat[i][c] = sum(w_h[i][j] * v[j][c] for j in range(T))
            heads_w.append(w_h)
        out = _linear(concat, params["Wo"], params.get("bo"))
        outs.append(out)
        weights.append(heads_w)
    return (outs, weights) if return_weights else outs
