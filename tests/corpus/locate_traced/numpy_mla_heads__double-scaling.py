# attn-kit: mla-decode
# traced-locate corpus: bases/numpy_mla_heads.py with double-scaling
"""Base of the traced-locate corpus: one MLA decode step, head by head, in a class with a closure."""
import numpy as np


def _turn(x, position):
    half = x.shape[-1] // 2
    freq = 1.0 / 10000.0 ** (np.arange(half) * 2.0 / x.shape[-1])
    angle = position * freq
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], axis=-1)


class Step:
    def __init__(self, params, num_heads):
        self.p = {name: np.asarray(w, dtype=np.float64) for name, w in params.items()}
        self.H = num_heads
        self.d_c = self.p["W_dkv"].shape[1]
        self.d_r = self.p["W_kr"].shape[1]
        self.d_nope = self.p["W_uk"].shape[1] // num_heads
        self.d_v = self.p["W_uv"].shape[1] // num_heads

    def __call__(self, x, position, cache):
        latent = x @ self.p["W_dkv"]
        shared = _turn(x @ self.p["W_kr"], position)
        if cache is None:
            lat_all, rot_all = latent[:, None, :], shared[:, None, :]
        else:
            lat_all = np.concatenate([np.asarray(cache["c_kv"], dtype=np.float64), latent[:, None, :]], axis=1)
            rot_all = np.concatenate([np.asarray(cache["k_rope"], dtype=np.float64), shared[:, None, :]], axis=1)
        query = x @ self.p["W_q"] / np.sqrt(self.d_nope + self.d_r)
        width = self.d_nope + self.d_r

        def head(h):
            qh = query[:, h * width : (h + 1) * width]
            absorbed = qh[:, : self.d_nope] @ self.p["W_uk"][:, h * self.d_nope : (h + 1) * self.d_nope].T
            rot = _turn(qh[:, self.d_nope :], position)
            logits = np.einsum("bc,btc->bt", absorbed, lat_all) + np.einsum("br,btr->bt", rot, rot_all)
            logits = logits / np.sqrt(width)
            e = np.exp(logits - logits.max(axis=-1, keepdims=True))
            att = e / e.sum(axis=-1, keepdims=True)
            mixed = np.einsum("bt,btc->bc", att, lat_all)
            return mixed @ self.p["W_uv"][:, h * self.d_v : (h + 1) * self.d_v]

        heads = np.concatenate([head(h) for h in range(self.H)], axis=-1)
        return heads @ self.p["W_o"], {"c_kv": lat_all, "k_rope": rot_all}


def mla_decode_step(x_t, params, num_heads, position, cache=None):
    x = np.asarray(x_t, dtype=np.float64)
    return Step(params, num_heads)(x, position, cache)
