# attn-kit: mha-masked-bias
"""Reference solution for mha-masked-bias in NumPy: the same interface, values only.

The kit gives a file that does not import torch float64 NumPy arrays; `masks` may be an empty
dict. It reads side by side with reference_torch.py, one line for one line.
"""
import math

import numpy as np


def _allowed(masks, B, H, Q, K, causal, causal_offset):
    """[B,H,Q,K] booleans: every present mask intersected, plus the causal bound."""
    allowed = np.ones((B, H, Q, K), dtype=bool)
    if masks.get("key_mask") is not None:
        allowed = allowed & np.asarray(masks["key_mask"], dtype=bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        allowed = allowed & np.asarray(masks["query_mask"], dtype=bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        allowed = allowed & np.asarray(masks["attention_mask"], dtype=bool)
    if causal:
        i = np.arange(Q)[:, None]
        j = np.arange(K)[None, :]
        allowed = allowed & (j <= i + causal_offset)
    return allowed


def _masked_softmax(scores, allowed):
    """Softmax over keys (last axis) restricted to allowed entries; an empty row is all zeros."""
    any_allowed = allowed.any(axis=-1, keepdims=True)
    top = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(any_allowed, top, 0.0)
    shifted = np.where(allowed, scores - top, 0.0)
    e = np.where(allowed, np.exp(shifted), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def _project(x, parameters, w, b):
    y = x @ np.asarray(parameters[w], dtype=np.float64)
    if parameters.get(b) is not None:
        y = y + np.asarray(parameters[b], dtype=np.float64)
    return y


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = np.asarray(activations["query"], dtype=np.float64)
    context = np.asarray(activations["context"], dtype=np.float64)
    masks = masks or {}
    B, Q, _ = query.shape
    K = context.shape[1]
    H = heads
    w_q, w_v = np.asarray(parameters["w_q"]), np.asarray(parameters["w_v"])
    if H < 1 or w_q.shape[1] % H or w_v.shape[1] % H:
        raise ValueError(f"heads={H} must divide the projected widths")
    D = w_q.shape[1] // H
    Dv = w_v.shape[1] // H

    # [B,T,H·D] -> [B,T,H,D] (head h owns columns h*D:(h+1)*D) -> [B,H,T,D]
    q = _project(query, parameters, "w_q", "b_q").reshape(B, Q, H, D).transpose(0, 2, 1, 3)
    k = _project(context, parameters, "w_k", "b_k").reshape(B, K, H, D).transpose(0, 2, 1, 3)
    v = _project(context, parameters, "w_v", "b_v").reshape(B, K, H, Dv).transpose(0, 2, 1, 3)

    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
    if activations.get("bias") is not None:
        scores = scores + np.asarray(activations["bias"], dtype=np.float64)   # after scaling

    allowed = _allowed(masks, B, H, Q, K, causal, causal_offset)
    attention = _masked_softmax(scores, allowed)                          # [B,H,Q,K]
    summary = (attention @ v).transpose(0, 2, 1, 3).reshape(B, Q, H * Dv)
    output = _project(summary, parameters, "w_o", "b_o")

    # a query with no allowed key in any head outputs 0; one active head keeps b_o
    active = allowed.any(axis=-1).any(axis=1)                             # [B,Q]
    output = np.where(active[:, :, None], output, 0.0)
    return output, attention
