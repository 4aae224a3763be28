# attn-kit: kv-cache
# traced-locate corpus: bases/numpy_kv_cache.py with biases-ignored
"""Traced-locate corpus base: one decoding step done by a class, with a closure for the heads."""
import numpy as np


class Step:
    def __init__(self, params, num_heads):
        self.p = {k: (None if v is None else np.asarray(v, dtype=np.float64)) for k, v in params.items()}
        self.num_heads = num_heads

    def project(self, x, name):
        out = x @ self.p["W" + name]
        b = self.p.get("b" + name)
        return out

    def __call__(self, x, cache):
        B, D = x.shape
        H = self.num_heads
        hd = D // H

        def heads(a):
            n = a.shape[1]
            return a.reshape(B, n, H, hd).transpose(0, 2, 1, 3)

        q = self.project(x, "q").reshape(B, H, 1, hd)
        k_new = self.project(x, "k")[:, None, :]
        v_new = self.project(x, "v")[:, None, :]
        if cache is None:
            keys, values = k_new, v_new
        else:
            keys = np.concatenate([np.asarray(cache[0], dtype=np.float64), k_new], axis=1)
            values = np.concatenate([np.asarray(cache[1], dtype=np.float64), v_new], axis=1)
        k, v = heads(keys), heads(values)
        scores = q @ k.transpose(0, 1, 3, 2)
        scaled = scores / np.sqrt(hd)
        top = scaled.max(axis=-1, keepdims=True)
        e = np.exp(scaled - top)
        weights = e / e.sum(axis=-1, keepdims=True)
        ctx = (weights @ v).transpose(0, 2, 1, 3).reshape(B, D)
        return self.project(ctx, "o"), (keys, values)


def decode_step(x_t, params, num_heads, cache=None):
    x = np.asarray(x_t, dtype=np.float64)
    B, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    return Step(params, num_heads)(x, cache)
