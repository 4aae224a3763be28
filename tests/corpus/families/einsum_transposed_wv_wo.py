# attn-kit: mha-screen
import numpy as np


def _bias(y, b):
    return y if b is None else y + np.asarray(b, float)


def _weights(s, allowed):
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    w = np.exp(s - top)
    z = w.sum(-1, keepdims=True)
    w = w / np.where(z == 0, 1.0, z)
    if allowed is not None:
        pass
    return w


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, float)
    a = None if allowed is None else np.asarray(allowed, bool)
    return list(_weights(s.copy(), a))


def causal_mask(B, T):
    return np.tile(np.tril(np.ones((T, T), bool)), (B, 1, 1))


def padding_mask(lengths, T):
    keys = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    return np.repeat(keys[:, None, :], T, axis=1)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    p = params
    x = np.asarray(x, float)
    B, T, D = x.shape
    if num_heads <= 0 or D % num_heads:
        raise ValueError("model width not divisible by the number of heads")
    H, hd = num_heads, D // num_heads
    q = _bias(np.einsum("btd,de->bte", x, np.asarray(p["Wq"], float)), p.get("bq")).reshape(B, T, H, hd)
    k = _bias(np.einsum("btd,de->bte", x, np.asarray(p["Wk"], float)), p.get("bk")).reshape(B, T, H, hd)
    v = _bias(np.einsum("btd,ed->bte", x, np.asarray(p["Wv"], float)), p.get("bv")).reshape(B, T, H, hd)
    s = np.einsum("bihc,bjhc->bhij", q, k) / np.sqrt(hd)
    allowed = None if mask is None else np.asarray(mask, bool)[:, None, :, :]
    w = _weights(s, allowed)
    merged = np.einsum("bhij,bjhc->bihc", w, v).reshape(B, T, D)
    out = _bias(np.einsum("btd,ed->bte", merged, np.asarray(p["Wo"], float)), p.get("bo"))
    return (out, w) if return_weights else out
