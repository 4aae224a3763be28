"""A correct rope solution written unlike the references: each pair (u[i], u[i + hd/2]) as one
complex number multiplied by exp(i·p·θ), einsum for the attention, no header line."""
import numpy as np


def apply_rope(x, positions, base=10000.0):
    x = np.array(x, dtype=float)
    hd = x.shape[-1]
    if hd % 2:
        raise ValueError("head width must be even")
    half = hd // 2
    z = x[..., :half] + 1j * x[..., half:]
    theta = np.power(float(base), -np.arange(0, hd, 2) / hd)
    z = z * np.exp(1j * np.outer(np.asarray(positions, dtype=float), theta))
    return np.concatenate([z.real, z.imag], axis=-1)


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.array(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("the head width must be even")
    pos = np.arange(T) if positions is None else positions

    def proj(name):
        y = x @ np.array(params[f"W{name}"], dtype=float)
        bias = params.get(f"b{name}")
        return y if bias is None else y + np.array(bias, dtype=float)

    q, k, v = (proj(n).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3) for n in "qkv")
    q, k = apply_rope(q, pos), apply_rope(k, pos)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(hd)
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.array(mask, dtype=bool)[:, None]
    s = np.where(ok, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    z = e.sum(-1, keepdims=True)
    w = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    heads = np.einsum("bhij,bhjd->bihd", w, v).reshape(B, T, D)
    out = heads @ np.array(params["Wo"], dtype=float)
    if params.get("bo") is not None:
        out = out + np.array(params["bo"], dtype=float)
    return (out, w) if return_weights else out
