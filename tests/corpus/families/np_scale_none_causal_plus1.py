# attn-kit: mha-screen
import numpy as np

DT = np.float64


def _softmax(s, ok=None):
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(axis=-1, keepdims=True)
    return e / np.where(z > 0, z, 1.0)


def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=DT)
    ok = None if allowed is None else np.array(allowed, dtype=bool)
    return _softmax(s, ok).tolist()


def causal_mask(B, T):
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    m = j <= i + 1
    return np.broadcast_to(m, (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths)
    return np.broadcast_to(np.arange(T)[None, None, :] < n[:, None, None], (len(n), T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=DT)
    B, T, D = x.shape
    H = num_heads
    if H < 1 or D % H != 0:
        raise ValueError(f"D={D} is not divisible by num_heads={H}")
    hd = D // H

    def heads(y):
        return y.reshape(B, T, H, hd).transpose(0, 2, 1, 3)

    q = heads(x @ np.asarray(params["Wq"], dtype=DT) + (0.0 if params.get("bq") is None else np.asarray(params["bq"], dtype=DT)))
    k = heads(x @ np.asarray(params["Wk"], dtype=DT) + (0.0 if params.get("bk") is None else np.asarray(params["bk"], dtype=DT)))
    v = heads(x @ np.asarray(params["Wv"], dtype=DT) + (0.0 if params.get("bv") is None else np.asarray(params["bv"], dtype=DT)))
    scores = q @ k.transpose(0, 1, 3, 2) / DT(1.0)
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None]
    w = _softmax(scores, allowed)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = merged @ np.asarray(params["Wo"], dtype=DT) + (0.0 if params.get("bo") is None else np.asarray(params["bo"], dtype=DT))
    return (out, w) if return_weights else out
