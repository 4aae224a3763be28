# attn-kit: kv-cache
# A correct kv-cache solution written the way the statement's preallocation rule allows: a dict
# holding B×capacity×D buffers that double when full, beside an int "length" (the filled rows).
"""decode_step with a preallocated cache, updated in place; only the first `length` rows count."""
import numpy as np


def decode_step(x_t, params, num_heads, cache=None):
    x = np.asarray(x_t, dtype=np.float64)
    B, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError(f"D={D} must be divisible by num_heads={num_heads}")
    hd = D // num_heads

    def project(w, b):
        y = x @ np.asarray(params[w], dtype=np.float64)
        return y if params.get(b) is None else y + np.asarray(params[b], dtype=np.float64)

    if cache is None:
        cache = {"k": np.zeros((B, 2, D)), "v": np.zeros((B, 2, D)), "length": 0}
    t = cache["length"]
    if t == cache["k"].shape[1]:                        # full: double the capacity
        for name in ("k", "v"):
            grown = np.zeros((B, 2 * t, D))
            grown[:, :t] = cache[name]
            cache[name] = grown
    cache["k"][:, t], cache["v"][:, t] = project("Wk", "bk"), project("Wv", "bv")
    cache["length"] = t + 1
    q = project("Wq", "bq").reshape(B, num_heads, 1, hd)
    keys = cache["k"][:, :t + 1].reshape(B, t + 1, num_heads, hd).transpose(0, 2, 1, 3)
    values = cache["v"][:, :t + 1].reshape(B, t + 1, num_heads, hd).transpose(0, 2, 1, 3)
    scores = q @ keys.swapaxes(-1, -2) / np.sqrt(hd)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    heads = (weights @ values).reshape(B, D)
    out = heads @ np.asarray(params["Wo"], dtype=np.float64)
    if params.get("bo") is not None:
        out = out + np.asarray(params["bo"], dtype=np.float64)
    return out, cache
