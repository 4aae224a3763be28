# attn-kit: varlen-prefill
"""Written from the statement alone, in plain Python loops over lists (math only). Correct."""

import math


def rotate(vec, pos):
    d = len(vec)
    h = d // 2
    out = [0.0] * d
    for i in range(h):
        a = pos * 10000.0 ** (-2 * i / d)
        c, s = math.cos(a), math.sin(a)
        out[i] = vec[i] * c - vec[i + h] * s
        out[i + h] = vec[i + h] * c + vec[i] * s
    return out


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    H, Hkv, dv = q.shape[1], k.shape[1], v.shape[2]
    q, k, v = q.tolist(), k.tolist(), v.tolist()
    cq, ck = [int(x) for x in cu_seqlens_q], [int(x) for x in cu_seqlens_k]
    out = []
    for doc in range(len(cq) - 1):
        nq, nk = cq[doc + 1] - cq[doc], ck[doc + 1] - ck[doc]
        cached = nk - nq
        keys = {}
        for t in range(nq):
            row = []
            pos = cached + t
            for h in range(H):
                g = h // (H // Hkv)
                qv = rotate(q[cq[doc] + t][h], pos)
                scale = 1.0 / math.sqrt(len(qv))
                scores = []
                for j in range(pos + 1):
                    if (j, g) not in keys:
                        keys[(j, g)] = rotate(k[ck[doc] + j][g], j)
                    kv = keys[(j, g)]
                    scores.append(sum(a * b for a, b in zip(qv, kv)) * scale)
                top = max(scores)
                ws = [math.exp(s - top) for s in scores]
                total = sum(ws)
                vals = [v[ck[doc] + j][g] for j in range(pos + 1)]
                row.append([sum(w * val[c] for w, val in zip(ws, vals)) / total for c in range(len(vals[0]))])
            out.append(row)
    if not out:
        import numpy as np

        return np.zeros((0, H, dv))
    return out
