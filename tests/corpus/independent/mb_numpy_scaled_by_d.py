# attn-kit: mha-masked-bias
"""Scales the scores by D, not sqrt(D), where D is the per-head key width: 1/sqrt(D) applied
twice, which is the catalogue's double-scaling (written here as one division by D)."""
import numpy as np


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    f = lambda a: np.asarray(a, dtype=np.float64)
    xq, xc = f(activations["query"]), f(activations["context"])
    masks = masks or {}
    B, Q, _ = xq.shape
    K = xc.shape[1]
    H = heads
    Wq, Wk, Wv, Wo = (f(parameters[n]) for n in ("w_q", "w_k", "w_v", "w_o"))
    if H < 1 or Wq.shape[1] % H or Wv.shape[1] % H:
        raise ValueError("heads must divide the projected widths")
    D, Dv = Wq.shape[1] // H, Wv.shape[1] // H

    def bias(name):
        b = parameters.get(name)
        return 0.0 if b is None else f(b)

    q = np.einsum("bqc,ce->bqe", xq, Wq) + bias("b_q")
    k = np.einsum("bkc,ce->bke", xc, Wk) + bias("b_k")
    v = np.einsum("bkc,ce->bke", xc, Wv) + bias("b_v")
    q, k, v = q.reshape(B, Q, H, D), k.reshape(B, K, H, D), v.reshape(B, K, H, Dv)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / D
    if activations.get("bias") is not None:
        s = s + f(activations["bias"])
    ok = np.ones((B, H, Q, K), dtype=bool)
    if masks.get("key_mask") is not None:
        ok = ok & np.asarray(masks["key_mask"], dtype=bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        ok = ok & np.asarray(masks["query_mask"], dtype=bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        ok = ok & np.asarray(masks["attention_mask"], dtype=bool)
    if causal:
        ok = ok & (np.arange(K)[None, :] <= np.arange(Q)[:, None] + causal_offset)
    masked = np.where(ok, s, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(np.where(ok, s - top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    att = e / np.where(total > 0, total, 1.0)
    o = np.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, Q, H * Dv)
    o = o @ Wo + bias("b_o")
    active = ok.any(axis=-1).any(axis=1)
    o = np.where(active[:, :, None], o, 0.0)
    return o, att
