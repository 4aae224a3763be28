"""RoPE written independently in lists with interleaved pairs (2i, 2i + 1). Not derived from the kit's files:
the diagnosis must still name the mistake."""
import math


def apply_rope(x, positions, base=10000.0):
    out = []
    for batch in x:
        hs = []
        for head in batch:
            rows = []
            for t, u in enumerate(head):
                hd = len(u)
                if hd % 2:
                    raise ValueError("hd must be even")
                r = list(u)
                for i in range(hd // 2):
                    a = positions[t] * base ** (-2 * i / hd)
                    c, s = math.cos(a), math.sin(a)
                    r[2 * i], r[2 * i + 1] = u[2 * i] * c - u[2 * i + 1] * s, u[2 * i + 1] * c + u[2 * i] * s
                rows.append(r)
            hs.append(rows)
        out.append(hs)
    return out


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    import numpy as np
    x = np.asarray(x, float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("even")
    pos = list(range(T)) if positions is None else [int(p) for p in positions]
    def proj(n):
        y = x @ np.asarray(params["W" + n], float)
        return y + np.asarray(params["b" + n], float) if params.get("b" + n) is not None else y
    q, k, v = (proj(n).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3) for n in "qkv")
    q, k = np.array(apply_rope(q.tolist(), pos)), np.array(apply_rope(k.tolist(), pos))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.asarray(mask, bool)[:, None]
    s = np.where(ok, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z > 0, z, 1)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ np.asarray(params["Wo"], float)
    if params.get("bo") is not None:
        out = out + np.asarray(params["bo"], float)
    return (out, w) if return_weights else out
