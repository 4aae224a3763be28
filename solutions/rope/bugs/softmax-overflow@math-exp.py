# attn-kit: rope
"""Known bug `softmax-overflow`: math.exp of the raw scores (OverflowError at large scores).

The reference solution with exactly one change, marked BUG(softmax-overflow).
"""
import math


def apply_rope(x, positions, base=10000.0):
    positions = [int(p) for p in positions]
    out = []
    for batch in x:
        heads = []
        for head in batch:
            rows = []
            for t, u in enumerate(head):
                hd = len(u)
                if hd % 2:
                    raise ValueError(f"rotary embeddings rotate pairs of features: the head width must be even, got {hd}")
                half = hd // 2
                first, second = [], []
                for i in range(half):
                    a = positions[t] * base ** (-2.0 * i / hd)
                    c, s = math.cos(a), math.sin(a)
                    first.append(u[i] * c - u[i + half] * s)
                    second.append(u[i + half] * c + u[i] * s)
                rows.append(first + second)
            heads.append(rows)
        out.append(heads)
    return out


def _softmax(scores, allowed):
    kept = [s for s, ok in zip(scores, allowed) if ok]
    if not kept:                       # no allowed key: all zeros, never NaN or uniform
        return [0.0] * len(scores)
    m = max(kept)
    e = [math.exp(s) if ok else 0.0 for s, ok in zip(scores, allowed)]  # BUG(softmax-overflow): no max subtracted
    total = sum(e)
    return [v / total for v in e]


def _project(rows, params, w, b):
    cols = list(zip(*params[w]))
    out = [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in rows]
    bias = params.get(b)
    if bias is not None:
        out = [[v + bv for v, bv in zip(row, bias)] for row in out]
    return out


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = [[[float(v) for v in tok] for tok in seq] for seq in x]
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    if hd % 2:
        raise ValueError(f"rotary embeddings need an even head width; D // num_heads = {hd} is odd")
    positions = list(range(T)) if positions is None else [int(p) for p in positions]
    out, all_weights = [], []
    for b in range(B):
        q = _project(x[b], params, "Wq", "bq")
        k = _project(x[b], params, "Wk", "bk")
        v = _project(x[b], params, "Wv", "bv")
        # heads: H lists of T vectors of width hd, then rotate q and k (not v)
        qh = apply_rope([[[row[h * hd:(h + 1) * hd] for row in q] for h in range(num_heads)]], positions)[0]
        kh = apply_rope([[[row[h * hd:(h + 1) * hd] for row in k] for h in range(num_heads)]], positions)[0]
        concat = [[0.0] * D for _ in range(T)]
        batch_weights = []
        for h in range(num_heads):
            head_weights = []
            for i in range(T):
                scores = [sum(a * c for a, c in zip(qh[h][i], kh[h][j])) / math.sqrt(hd) for j in range(T)]
                allowed = [True] * T if mask is None else [bool(a) for a in mask[b][i]]
                w = _softmax(scores, allowed)
                head_weights.append(w)
                for c in range(h * hd, (h + 1) * hd):
                    concat[i][c] = sum(w[j] * v[j][c] for j in range(T))
            batch_weights.append(head_weights)
        out.append(_project(concat, params, "Wo", "bo"))
        all_weights.append(batch_weights)
    return (out, all_weights) if return_weights else out
