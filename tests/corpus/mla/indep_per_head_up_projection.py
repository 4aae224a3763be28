# attn-kit: mla-decode
"""Written from the statement alone: right values, but each head's keys and values are
up-projected over the cache, one head at a time (no absorption)."""

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
    q = (x @ P["W_q"]).reshape(B, H, dn + d_R)
    qr = rope(q[..., dn:], position)
    heads = []
    for h in range(H):
        k_h = c @ P["W_uk"][:, h * dn : (h + 1) * dn]  # B×t×dn, one head at a time
        v_h = c @ P["W_uv"][:, h * dv : (h + 1) * dv]
        s = (np.einsum("bn,btn->bt", q[:, h, :dn], k_h) + np.einsum("br,btr->bt", qr[:, h], kr)) / np.sqrt(dn + d_R)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        heads.append(np.einsum("bt,btv->bv", w, v_h))
    o = np.concatenate(heads, -1)
    return o @ P["W_o"], {"c_kv": c, "k_rope": kr}
