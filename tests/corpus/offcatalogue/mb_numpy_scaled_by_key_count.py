# attn-kit: mha-masked-bias
"""Scales the scores by the square root of the number of keys, not of the key width."""
import math

import numpy as np


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = np.array(activations["query"], dtype=float)
    context = np.array(activations["context"], dtype=float)
    bias = activations.get("bias")
    masks = masks or {}
    B, Q, _ = query.shape
    K = context.shape[1]
    w = {n: np.array(parameters[n], dtype=float) for n in ("w_q", "w_k", "w_v", "w_o")}
    b = {n: (np.zeros(1) if parameters.get(n) is None else np.array(parameters[n], dtype=float))
         for n in ("b_q", "b_k", "b_v", "b_o")}
    if heads < 1 or w["w_q"].shape[1] % heads or w["w_v"].shape[1] % heads:
        raise ValueError("heads must divide the projected widths")
    d = w["w_q"].shape[1] // heads
    dv = w["w_v"].shape[1] // heads

    allowed = np.ones((B, heads, Q, K), dtype=bool)
    if masks.get("key_mask") is not None:
        allowed = allowed & np.array(masks["key_mask"], dtype=bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        allowed = allowed & np.array(masks["query_mask"], dtype=bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        allowed = allowed & np.array(masks["attention_mask"], dtype=bool)
    if causal:
        allowed = allowed & (np.arange(K)[None, :] <= np.arange(Q)[:, None] + causal_offset)
    extra = np.zeros((B, heads, Q, K)) if bias is None else np.broadcast_to(np.array(bias, dtype=float), (B, heads, Q, K))

    q = query @ w["w_q"] + b["b_q"]
    k = context @ w["w_k"] + b["b_k"]
    v = context @ w["w_v"] + b["b_v"]
    att = np.zeros((B, heads, Q, K))
    heads_out = np.zeros((B, Q, heads * dv))
    for h in range(heads):
        qh, kh, vh = q[..., h * d:(h + 1) * d], k[..., h * d:(h + 1) * d], v[..., h * dv:(h + 1) * dv]
        s = qh @ kh.transpose(0, 2, 1) / math.sqrt(K) + extra[:, h]
        s = np.where(allowed[:, h], s, -np.inf)
        top = s.max(axis=-1, keepdims=True)
        top[~np.isfinite(top)] = 0.0
        e = np.where(allowed[:, h], np.exp(s - top), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        att[:, h] = e / np.where(total > 0, total, 1.0)
        heads_out[..., h * dv:(h + 1) * dv] = att[:, h] @ vh
    out = heads_out @ w["w_o"] + b["b_o"]
    out[~allowed.any(axis=-1).any(axis=1)] = 0.0
    return out, att
