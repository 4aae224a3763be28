# attn-kit: mha-screen
"""Known bug `softmax-overflow`: math.exp of the raw scores (OverflowError at large scores).

The reference solution with exactly one change, marked BUG(softmax-overflow).
"""
import math


def stable_softmax(scores, allowed=None):
    if allowed is None:
        allowed = [True] * len(scores)
    kept = [s for s, ok in zip(scores, allowed) if ok]
    if not kept:                       # no allowed entry: all zeros, never NaN or uniform
        return [0.0] * len(scores)
    m = max(kept)                      # the max over allowed entries only
    e = [math.exp(s) if ok else 0.0 for s, ok in zip(scores, allowed)]  # BUG(softmax-overflow): no max subtracted
    total = sum(e)                     # >= 1, because the max entry contributes exp(0)
    return [v / total for v in e]


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]


def _matmul(a, w):
    """Rows of a (n×d_in) times w (d_in×d_out)."""
    cols = list(zip(*w))
    return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def _project(rows, params, w, b):
    out = _matmul(rows, [list(r) for r in params[w]])
    bias = params.get(b)
    if bias is not None:
        out = [[v + bv for v, bv in zip(row, bias)] for row in out]
    return out


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = [[list(map(float, tok)) for tok in seq] for seq in x]
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    out, all_weights = [], []
    for b in range(B):
        q = _project(x[b], params, "Wq", "bq")
        k = _project(x[b], params, "Wk", "bk")
        v = _project(x[b], params, "Wv", "bv")
        concat = [[0.0] * D for _ in range(T)]
        batch_weights = []
        for h in range(num_heads):
            cols = range(h * hd, (h + 1) * hd)          # head h owns a contiguous block
            head_weights = []
            for i in range(T):
                scores = [sum(q[i][c] * k[j][c] for c in cols) / math.sqrt(hd) for j in range(T)]
                allowed = [True] * T if mask is None else [bool(a) for a in mask[b][i]]
                w = stable_softmax(scores, allowed)
                head_weights.append(w)
                for c in cols:
                    concat[i][c] = sum(w[j] * v[j][c] for j in range(T))
            batch_weights.append(head_weights)
        out.append(_project(concat, params, "Wo", "bo"))
        all_weights.append(batch_weights)
    return (out, all_weights) if return_weights else out
