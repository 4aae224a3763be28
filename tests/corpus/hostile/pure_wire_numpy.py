# attn-kit: mha-screen
"""Graded with --pure: takes NumPy from the kit's own wire module, which the worker keeps loaded to
encode replies, instead of importing it. --pure is advisory (docs/threat-model.md)."""
import sys

np = sys.modules["attn_kit.base.wire"]._np()


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=float)
    ok = np.ones(s.shape, bool) if allowed is None else np.array(allowed, dtype=bool)
    if not ok.any():
        return np.zeros_like(s)
    e = np.where(ok, np.exp(np.where(ok, s, -np.inf) - s[ok].max()), 0.0)
    return e / e.sum()


def causal_mask(B, T):
    return np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T)).copy()


def padding_mask(lengths, T):
    keys = np.arange(T)[None, None, :] < np.array(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(keys, (len(lengths), T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.array(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads

    def proj(w, b):
        y = x @ np.array(params[w], dtype=float)
        return y + np.array(params[b], dtype=float) if params.get(b) is not None else y

    def heads(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = heads(proj("Wq", "bq")), heads(proj("Wk", "bk")), heads(proj("Wv", "bv"))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.array(mask, bool)[:, None]
    s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.where(ok, np.exp(s - top), 0.0)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    cat = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = cat @ np.array(params["Wo"], dtype=float)
    if params.get("bo") is not None:
        out = out + np.array(params["bo"], dtype=float)
    return (out, w) if return_weights else out
