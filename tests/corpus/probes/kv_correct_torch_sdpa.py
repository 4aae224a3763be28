# attn-kit: kv-cache
"""Correct, in a style unlike the references: torch float64, one fused qkv projection, the cache
grown with torch.cat and handed back as NumPy arrays, scaled_dot_product_attention for the one query."""

import numpy as np
import torch
import torch.nn.functional as F


def decode_step(x_t, params, num_heads, cache=None):
    x = torch.as_tensor(x_t, dtype=torch.float64)
    B, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("num_heads must divide D")
    hd = D // num_heads
    p = {k: None if v is None else torch.as_tensor(v, dtype=torch.float64) for k, v in params.items()}
    zero = torch.zeros(D, dtype=torch.float64)
    w = torch.cat([p["Wq"], p["Wk"], p["Wv"]], dim=1)
    b = torch.cat([p.get(n) if p.get(n) is not None else zero for n in ("bq", "bk", "bv")])
    q, k, v = (x @ w + b).split(D, dim=-1)
    if cache is not None:
        k = torch.cat([torch.as_tensor(np.asarray(cache[0]), dtype=torch.float64), k[:, None]], dim=1)
        v = torch.cat([torch.as_tensor(np.asarray(cache[1]), dtype=torch.float64), v[:, None]], dim=1)
    else:
        k, v = k[:, None], v[:, None]
    n = k.shape[1]
    heads = lambda t, m: t.reshape(B, m, num_heads, hd).transpose(1, 2)  # noqa: E731
    o = F.scaled_dot_product_attention(heads(q, 1), heads(k, n), heads(v, n))
    out = o.transpose(1, 2).reshape(B, D) @ p["Wo"]
    if p.get("bo") is not None:
        out = out + p["bo"]
    return out.numpy(), (k.numpy(), v.numpy())
