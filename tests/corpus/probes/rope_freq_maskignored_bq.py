# attn-kit: rope
"""Frequencies base^(-i/hd) (the exponent's 2 forgotten), the mask never applied, b_q dropped:
lists and loops."""

import math


def apply_rope(x, positions, base=10000.0):
    out = []
    for batch in x:
        hs = []
        for head in batch:
            rows = []
            for vec, p in zip(head, positions):
                hd = len(vec)
                if hd % 2:
                    raise ValueError("odd head width")
                half = hd // 2
                r = [0.0] * hd
                for i in range(half):
                    a = p * base ** (-i / hd)
                    c, s = math.cos(a), math.sin(a)
                    r[i] = vec[i] * c - vec[i + half] * s
                    r[i + half] = vec[i + half] * c + vec[i] * s
                rows.append(r)
            hs.append(rows)
        out.append(hs)
    return out


def _mm(a, w):
    return [[sum(r[k] * w[k][j] for k in range(len(r))) for j in range(len(w[0]))] for r in a]


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads or (D // num_heads) % 2:
        raise ValueError("bad head count")
    hd = D // num_heads
    pos = list(range(T)) if positions is None else list(positions)

    def proj(rows, w, b):
        y = _mm(rows, params[w])
        if b is not None and params.get(b) is not None:
            y = [[v + params[b][j] for j, v in enumerate(r)] for r in y]
        return y

    outs, weights = [], []
    for bi in range(B):
        q, k, v = proj(x[bi], "Wq", None), proj(x[bi], "Wk", "bk"), proj(x[bi], "Wv", "bv")
        split = lambda y: [[row[h * hd : (h + 1) * hd] for row in y] for h in range(num_heads)]  # noqa: E731
        qh, kh, vh = apply_rope([split(q)], pos)[0], apply_rope([split(k)], pos)[0], split(v)
        cat = [[0.0] * D for _ in range(T)]
        wb = []
        for h in range(num_heads):
            wh = []
            for i in range(T):
                s = [sum(a * b for a, b in zip(qh[h][i], kh[h][j])) / math.sqrt(hd) for j in range(T)]
                m = max(s)
                e = [math.exp(t - m) for t in s]
                z = sum(e)
                wr = [t / z for t in e]
                wh.append(wr)
                for d in range(hd):
                    cat[i][h * hd + d] = sum(wr[j] * vh[h][j][d] for j in range(T))
            wb.append(wh)
        outs.append(proj(cat, "Wo", "bo"))
        weights.append(wb)
    return (outs, weights) if return_weights else outs
