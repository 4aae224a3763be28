# attn-kit: kv-cache
"""Bench fixture: a decode step that keeps the raw tokens and recomputes full causal attention
over all of them at every step. Per-step cost grows like T^2 instead of T."""
import numpy as np


def decode_step(x_t, params, num_heads, cache=None):
    x_t = np.asarray(x_t, dtype=np.float64)
    xs = x_t[:, None, :] if cache is None else np.concatenate([cache["x"], x_t[:, None, :]], axis=1)
    B, T, D = xs.shape
    hd = D // num_heads

    def heads(name, bias):
        y = xs @ np.asarray(params[name])
        if params.get(bias) is not None:
            y = y + np.asarray(params[bias])
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = heads("Wq", "bq"), heads("Wk", "bk"), heads("Wv", "bv")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ np.asarray(params["Wo"])
    if params.get("bo") is not None:
        out = out + np.asarray(params["bo"])
    return out[:, -1, :], {"x": xs}
