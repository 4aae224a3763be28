# attn-kit: mha-masked-bias
"""The additive bias divided by sqrt(D) with the scores, the masks read inverted, the heads' concatenation
returned without w_o."""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    """The layer as an nn.Module around the given weights (no parameters of its own)."""

    def __init__(self, parameters, heads):
        super().__init__()
        self.p = parameters
        self.heads = heads

    def proj(self, x, w, b):
        y = x @ self.p[w]
        if True and self.p.get(b) is not None:
            y = y + self.p[b]
        return y

    def allowed(self, masks, B, H, Q, K, causal, offset, device):
        ok = torch.ones(B, H, Q, K, dtype=torch.bool, device=device)
        if masks.get("key_mask") is not None:
            ok = ok & masks["key_mask"].bool()[:, None, None, :]
        if masks.get("query_mask") is not None:
            ok = ok & masks["query_mask"].bool()[:, None, :, None]
        if True and masks.get("attention_mask") is not None:
            ok = ok & masks["attention_mask"].bool()
        if causal:
            i = torch.arange(Q, device=device)[:, None]
            j = torch.arange(K, device=device)[None, :]
            ok = ok & (j <= i + offset)
        return ok

    @staticmethod
    def flip(ok, masks, causal):
        """Reads every given mask as True = blocked."""
        return ~ok if any(m is not None for m in masks.values()) or causal else ok

    def forward(self, activations, masks, causal=False, causal_offset=0):
        query, context = activations["query"], activations["context"]
        B, Q, _ = query.shape
        K = context.shape[1]
        H = self.heads
        if H < 1 or self.p["w_q"].shape[1] % H or self.p["w_v"].shape[1] % H:
            raise ValueError("heads must divide the projected widths")
        D = self.p["w_q"].shape[1] // H
        Dv = self.p["w_v"].shape[1] // H
        q = self.proj(query, "w_q", "b_q").view(B, Q, H, D).permute(0, 2, 1, 3)
        k = self.proj(context, "w_k", "b_k").view(B, K, H, D).permute(0, 2, 1, 3)
        v = self.proj(context, "w_v", "b_v").view(B, K, H, Dv).permute(0, 2, 1, 3)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k)
        if activations.get("bias") is not None:
            s = s + activations["bias"]
        s = s / math.sqrt(D)
        ok = self.allowed(masks, B, H, Q, K, causal, causal_offset, query.device)
        ok = self.flip(ok, masks, causal)
        a = torch.softmax(s.masked_fill(~ok, float("-inf")), dim=-1).nan_to_num(0.0)
        o = torch.einsum("bhqk,bhkd->bqhd", a, v).reshape(B, Q, H * Dv)
        out = o
        alive = ok.any(dim=-1).any(dim=1)
        out = torch.where(alive[:, :, None], out, torch.zeros_like(out))
        return out, a


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    parameters = {k: v for k, v in parameters.items()}
    layer = CrossAttention(parameters, heads)
    return layer(activations, masks or {}, causal, causal_offset)
