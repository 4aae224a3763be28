# attn-kit: mha-masked-bias
# traced-locate corpus: bases/numpy_masked_bias.py with biases-ignored
"""Traced-locate corpus base: masked attention with an additive bias, in a class with a closure."""
import math

import numpy as np


class MaskedAttention:
    def __init__(self, parameters, heads):
        self.w = parameters
        self.heads = heads

    def linear(self, x, name):
        y = x @ np.asarray(self.w["w_" + name], dtype=np.float64)
        b = self.w.get("b_" + name)
        return y

    def allowed(self, masks, B, Q, K, causal, offset):
        ok = np.ones((B, 1, Q, K), dtype=bool)
        if masks.get("key_mask") is not None:
            ok = ok & np.asarray(masks["key_mask"], dtype=bool)[:, None, None, :]
        if masks.get("query_mask") is not None:
            ok = ok & np.asarray(masks["query_mask"], dtype=bool)[:, None, :, None]
        if masks.get("attention_mask") is not None:
            ok = ok & np.asarray(masks["attention_mask"], dtype=bool)
        if causal:
            ok = ok & (np.arange(K)[None, :] <= np.arange(Q)[:, None] + offset)
        return ok

    def __call__(self, query, context, bias, masks, causal, offset):
        B, Q, _ = query.shape
        K = context.shape[1]
        H = self.heads

        def split(y):
            return y.reshape(B, y.shape[1], H, y.shape[2] // H).transpose(0, 2, 1, 3)

        q = split(self.linear(query, "q"))
        k = split(self.linear(context, "k"))
        v = split(self.linear(context, "v"))
        scores = q @ k.transpose(0, 1, 3, 2)
        scores = scores / math.sqrt(q.shape[-1])
        if bias is not None:
            scores = scores + np.asarray(bias, dtype=np.float64)
        ok = self.allowed(masks, B, Q, K, causal, offset)
        any_ok = ok.any(axis=-1, keepdims=True)
        filled = np.where(ok, scores, -np.inf)
        top = np.where(any_ok, filled.max(axis=-1, keepdims=True), 0.0)
        e = np.where(ok, np.exp(np.where(ok, scores - top, 0.0)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        weights = e / np.where(total > 0, total, 1.0)
        merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B, Q, -1)
        out = self.linear(merged, "o")
        active = ok.any(axis=-1).any(axis=1)
        out = np.where(active[:, :, None], out, 0.0)
        return out, weights


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = np.asarray(activations["query"], dtype=np.float64)
    context = np.asarray(activations["context"], dtype=np.float64)
    w_q, w_v = np.asarray(parameters["w_q"]), np.asarray(parameters["w_v"])
    if heads < 1 or w_q.shape[1] % heads or w_v.shape[1] % heads:
        raise ValueError(f"heads={heads} must divide the projected widths")
    layer = MaskedAttention(parameters, heads)
    return layer(query, context, activations.get("bias"), masks or {}, causal, causal_offset)
