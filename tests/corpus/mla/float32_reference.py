# attn-kit: mla-decode
"""The kit's absorbed reference computed in float32: within float32 rounding of the layer."""

import numpy as np


def _rope(x, position, base=10000.0):
    """Rotate the last axis (even width) of x by `position` (a number, or one per row), half-split pairs."""
    half = x.shape[-1] // 2
    theta = base ** (-2.0 * np.arange(half, dtype=np.float32) / x.shape[-1])
    a = np.multiply.outer(np.asarray(position, dtype=np.float32), theta)
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def _widths(params, num_heads):
    d_c = np.shape(params["W_dkv"])[1]
    d_R = np.shape(params["W_kr"])[1]
    n_uk, n_uv = np.shape(params["W_uk"])[1], np.shape(params["W_uv"])[1]
    if num_heads < 1 or n_uk % num_heads or n_uv % num_heads:
        raise ValueError(f"W_uk and W_uv widths ({n_uk}, {n_uv}) must be divisible by num_heads={num_heads}")
    if d_R % 2:
        raise ValueError(f"RoPE rotates pairs of features: d_R must be even, got {d_R}")
    return d_c, d_R, n_uk // num_heads, n_uv // num_heads


def mla_decode_step(x_t, params, num_heads, position, cache=None):
    x = np.asarray(x_t, dtype=np.float32)  # B×D: one new token per sequence
    B, D = x.shape
    H = num_heads
    d_c, d_R, d_nope, d_v = _widths(params, H)
    W = {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}

    c_new = x @ W["W_dkv"]  # B×d_c: the latent, not rotated
    k_r_new = _rope(x @ W["W_kr"], position)  # B×d_R: one rotary key for all heads
    if cache is None:
        latents, rope_keys = c_new[:, None], k_r_new[:, None]
    else:
        latents = np.concatenate([np.asarray(cache["c_kv"], dtype=np.float32), c_new[:, None]], axis=1)
        rope_keys = np.concatenate([np.asarray(cache["k_rope"], dtype=np.float32), k_r_new[:, None]], axis=1)

    q = (x @ W["W_q"]).reshape(B, H, d_nope + d_R)  # head h = columns h*(d_nope+d_R) ...
    q_nope, q_rope = q[..., :d_nope], _rope(q[..., d_nope:], position)
    w_uk = W["W_uk"].reshape(d_c, H, d_nope)  # head h's d_c×d_nope block
    w_uv = W["W_uv"].reshape(d_c, H, d_v)
    q_latent = np.einsum("bhn,chn->bhc", q_nope, w_uk)  # absorbed: q_nope_h @ W_uk_hᵀ, B×H×d_c

    scores = np.einsum("bhc,btc->bht", q_latent, latents)  # B×H×t: latents scored directly
    scores += np.einsum("bhr,btr->bht", q_rope, rope_keys)  # the shared rotary key, every head
    scores /= np.sqrt(d_nope + d_R)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)

    mixed = np.einsum("bht,btc->bhc", weights, latents)  # B×H×d_c: weighted latents
    heads = np.einsum("bhc,chv->bhv", mixed, w_uv)  # absorbed W_uv: B×H×d_v
    out = heads.reshape(B, H * d_v) @ W["W_o"]
    return out, {"c_kv": latents, "k_rope": rope_keys}
