# attn-kit: mla-decode
"""Written from the statement alone: right values, every head's keys and values up-projected
over the cache at once (no absorption)."""

import numpy as np


def rope(v, p):
    h = v.shape[-1] // 2
    th = 10000.0 ** (-np.arange(h) * 2.0 / v.shape[-1])
    c, s = np.cos(p * th), np.sin(p * th)
    return np.concatenate([v[..., :h] * c - v[..., h:] * s, v[..., h:] * c + v[..., :h] * s], -1)


def mla_decode_step(x_t, params, num_heads, position, cache=None):
    x = np.asarray(x_t, float)
    P = {k: np.asarray(v, float) for k, v in params.items()}
    B, H = x.shape[0], num_heads
    d_R = P["W_kr"].shape[1]
    dn, dv = P["W_uk"].shape[1] // H, P["W_uv"].shape[1] // H
    c = (x @ P["W_dkv"])[:, None]
    kr = rope(x @ P["W_kr"], position)[:, None]
    if cache is not None:
        c = np.concatenate([np.asarray(cache["c_kv"]), c], 1)
        kr = np.concatenate([np.asarray(cache["k_rope"]), kr], 1)
    t = c.shape[1]
    k_nope = (c @ P["W_uk"]).reshape(B, t, H, dn)
    v = (c @ P["W_uv"]).reshape(B, t, H, dv)
    q = (x @ P["W_q"]).reshape(B, H, dn + d_R)
    qn, qr = q[..., :dn], rope(q[..., dn:], position)
    s = (np.einsum("bhn,bthn->bht", qn, k_nope) + np.einsum("bhr,btr->bht", qr, kr)) / np.sqrt(dn + d_R)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("bht,bthv->bhv", w, v).reshape(B, H * dv)
    return o @ P["W_o"], {"c_kv": c, "k_rope": kr}
