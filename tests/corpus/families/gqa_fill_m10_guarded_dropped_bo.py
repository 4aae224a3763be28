# attn-kit: gqa
import numpy as np


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_kv_heads < 1 or num_heads % num_kv_heads or D % num_heads:
        raise ValueError("bad head counts")
    hd = D // num_heads
    g = num_heads // num_kv_heads
    q = (x @ np.asarray(params["Wq"], dtype=float) + np.asarray(params.get("bq") if params.get("bq") is not None else 0.0)).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ np.asarray(params["Wk"], dtype=float) + np.asarray(params.get("bk") if params.get("bk") is not None else 0.0)).reshape(B, T, num_kv_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ np.asarray(params["Wv"], dtype=float) + np.asarray(params.get("bv") if params.get("bv") is not None else 0.0)).reshape(B, T, num_kv_heads, hd).transpose(0, 2, 1, 3)
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is None:
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    else:
        ok = np.asarray(mask, dtype=bool)[:, None, :, :]
        s = np.where(ok, s, -10.0)
        top = s.max(-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        p = np.exp(s - top)
        z = p.sum(-1, keepdims=True)
        p = p / np.where(z > 0, z, 1.0)
        p = np.where(ok.any(-1, keepdims=True), p, 0.0)   # no allowed key: zero weights
    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ np.asarray(params["Wo"], dtype=float)
    return (out, p) if return_weights else out
