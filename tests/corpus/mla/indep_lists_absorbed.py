# attn-kit: mla-decode
"""Written from the statement alone, in plain lists: absorbed, correct."""

import math


def rope(v, p):
    n = len(v)
    h = n // 2
    out = [0.0] * n
    for i in range(h):
        a = p * 10000.0 ** (-2 * i / n)
        out[i] = v[i] * math.cos(a) - v[i + h] * math.sin(a)
        out[i + h] = v[i + h] * math.cos(a) + v[i] * math.sin(a)
    return out


def mv(row, W):
    return [sum(row[i] * W[i][j] for i in range(len(row))) for j in range(len(W[0]))]


def mla_decode_step(x_t, params, num_heads, position, cache=None):
    H = num_heads
    W_dkv, W_uk, W_uv, W_q, W_kr, W_o = (params[k] for k in ("W_dkv", "W_uk", "W_uv", "W_q", "W_kr", "W_o"))
    d_c, d_R = len(W_dkv[0]), len(W_kr[0])
    dn, dv = len(W_uk[0]) // H, len(W_uv[0]) // H
    B = len(x_t)
    if cache is None:
        cache = {"c_kv": [[] for _ in range(B)], "k_rope": [[] for _ in range(B)]}
    else:
        cache = {"c_kv": [list(map(list, s)) for s in cache["c_kv"]], "k_rope": [list(map(list, s)) for s in cache["k_rope"]]}
    outs = []
    for b in range(B):
        x = [float(v) for v in x_t[b]]
        cache["c_kv"][b].append(mv(x, W_dkv))
        cache["k_rope"][b].append(rope(mv(x, W_kr), position))
        q = mv(x, W_q)
        heads = []
        for h in range(H):
            qh = q[h * (dn + d_R) : (h + 1) * (dn + d_R)]
            qn, qr = qh[:dn], rope(qh[dn:], position)
            ql = [sum(qn[n] * W_uk[c][h * dn + n] for n in range(dn)) for c in range(d_c)]
            s = [
                (sum(a * b2 for a, b2 in zip(ql, cj)) + sum(a * b2 for a, b2 in zip(qr, kj))) / math.sqrt(dn + d_R)
                for cj, kj in zip(cache["c_kv"][b], cache["k_rope"][b])
            ]
            m = max(s)
            e = [math.exp(v - m) for v in s]
            z = sum(e)
            mixed = [sum(e[j] / z * cache["c_kv"][b][j][c] for j in range(len(e))) for c in range(d_c)]
            heads += [sum(mixed[c] * W_uv[c][h * dv + v] for c in range(d_c)) for v in range(dv)]
        outs.append(mv(heads, W_o))
    return outs, cache
