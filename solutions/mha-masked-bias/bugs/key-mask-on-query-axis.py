# attn-kit: mha-masked-bias
"""Known bug `key-mask-on-query-axis`: the [B, K] key mask is expanded as [B, 1, K, 1], along the queries, so it blocks query rows by position instead of key columns (and does not fit when Q differs from K).

The reference solution with exactly one change, marked BUG(key-mask-on-query-axis).
"""
import math

import torch


def _allowed(masks, B, H, Q, K, causal, causal_offset, device):
    """[B,H,Q,K] booleans: every present mask intersected, plus the causal bound."""
    allowed = torch.ones((B, H, Q, K), dtype=torch.bool, device=device)
    key_mask = masks.get("key_mask")
    if key_mask is not None:
        allowed = allowed & torch.as_tensor(key_mask, dtype=torch.bool, device=device)[:, None, :, None]  # BUG(key-mask-on-query-axis)
    query_mask = masks.get("query_mask")
    if query_mask is not None:
        allowed = allowed & torch.as_tensor(query_mask, dtype=torch.bool, device=device)[:, None, :, None]
    attention_mask = masks.get("attention_mask")
    if attention_mask is not None:
        allowed = allowed & torch.as_tensor(attention_mask, dtype=torch.bool, device=device)
    if causal:
        i = torch.arange(Q, device=device)[:, None]
        j = torch.arange(K, device=device)[None, :]
        allowed = allowed & (j <= i + causal_offset)
    return allowed


def _masked_softmax(scores, allowed):
    """Softmax over keys (last axis) restricted to allowed entries; an empty row is all zeros."""
    any_allowed = allowed.any(dim=-1, keepdim=True)
    # the shift only guards exp against overflow; softmax does not depend on it, so no gradient
    top = torch.where(allowed, scores, torch.full_like(scores, -math.inf)).amax(dim=-1, keepdim=True)
    top = torch.where(any_allowed, top, torch.zeros_like(top)).detach()
    shifted = torch.where(allowed, scores - top, torch.zeros_like(scores))    # blocked: exp(0), then dropped
    e = torch.where(allowed, torch.exp(shifted), torch.zeros_like(scores))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def _project(x, parameters, w, b):
    y = x @ parameters[w]
    if parameters.get(b) is not None:
        y = y + parameters[b]
    return y


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    as_tensor = torch.as_tensor           # NumPy arrays (a NumPy candidate's inputs) become tensors
    query = as_tensor(activations["query"])
    context = as_tensor(activations["context"])
    parameters = {k: None if v is None else as_tensor(v) for k, v in parameters.items()}
    masks = masks or {}
    B, Q, _ = query.shape
    K = context.shape[1]
    H = heads
    if H < 1 or parameters["w_q"].shape[1] % H or parameters["w_v"].shape[1] % H:
        raise ValueError(f"heads={H} must divide the projected widths")
    D = parameters["w_q"].shape[1] // H
    Dv = parameters["w_v"].shape[1] // H

    # [B,T,H·D] -> [B,T,H,D] (head h owns columns h*D:(h+1)*D) -> [B,H,T,D]
    q = _project(query, parameters, "w_q", "b_q").reshape(B, Q, H, D).transpose(1, 2)
    k = _project(context, parameters, "w_k", "b_k").reshape(B, K, H, D).transpose(1, 2)
    v = _project(context, parameters, "w_v", "b_v").reshape(B, K, H, Dv).transpose(1, 2)

    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    bias = activations.get("bias")
    if bias is not None:
        scores = scores + as_tensor(bias)          # added after scaling, broadcast to [B,H,Q,K]

    allowed = _allowed(masks, B, H, Q, K, causal, causal_offset, query.device)
    attention = _masked_softmax(scores, allowed)                    # [B,H,Q,K]
    summary = (attention @ v).transpose(1, 2).reshape(B, Q, H * Dv)  # heads side by side
    output = _project(summary, parameters, "w_o", "b_o")

    # a query with no allowed key in any head outputs 0; one active head keeps b_o
    active = allowed.any(dim=-1).any(dim=1)                         # [B,Q]
    output = torch.where(active[:, :, None], output, torch.zeros_like(output))
    return output, attention
