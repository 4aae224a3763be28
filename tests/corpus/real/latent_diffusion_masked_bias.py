# attn-kit: mha-masked-bias
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/CompVis/latent-diffusion
#   path ldm/modules/attention.py: exists, default, CrossAttention (and its imports)
#   commit a506df5756472e2ebaf9078affdde2c4f1502cd4
# Licence: MIT. Copyright (c) 2022 Machine Vision and Learning Group, LMU Munich
#   The licence's full text: tests/corpus/real/LICENSES/CompVis-latent-diffusion.txt
import numpy as np

# ---- stand-in for einops, which is not installed here: the patterns this file uses, nothing more ----
def rearrange(t, pattern, **axes):
    if pattern == "b n (h d) -> (b h) n d":
        b, n, hd = t.shape
        return t.reshape(b, n, axes["h"], hd // axes["h"]).permute(0, 2, 1, 3).reshape(b * axes["h"], n, hd // axes["h"])
    if pattern == "(b h) n d -> b n (h d)":
        bh, n, d = t.shape
        return t.reshape(bh // axes["h"], axes["h"], n, d).permute(0, 2, 1, 3).reshape(bh // axes["h"], n, axes["h"] * d)
    if pattern == "b ... -> b (...)":
        return t.reshape(t.shape[0], -1)
    raise NotImplementedError(pattern)


def repeat(t, pattern, **axes):
    if pattern == "b j -> (b h) () j":
        b, j = t.shape
        return t[:, None, None, :].expand(b, axes["h"], 1, j).reshape(b * axes["h"], 1, j)
    raise NotImplementedError(pattern)
# ---- end of the stand-in ----

# ---- verbatim ----
from inspect import isfunction
import math
import torch
import torch.nn.functional as F
from torch import nn, einsum


def exists(val):
    return val is not None


def uniq(arr):
    return{el: True for el in arr}.keys()


def default(val, d):
    if exists(val):
        return val
    return d() if isfunction(d) else d

class CrossAttention(nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=8, dim_head=64, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)

        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, query_dim),
            nn.Dropout(dropout)
        )

    def forward(self, x, context=None, mask=None):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k = self.to_k(context)
        v = self.to_v(context)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> (b h) n d', h=h), (q, k, v))

        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale

        if exists(mask):
            mask = rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = repeat(mask, 'b j -> (b h) () j', h=h)
            sim.masked_fill_(~mask, max_neg_value)

        # attention, what we cannot get enough of
        attn = sim.softmax(dim=-1)

        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b h) n d -> b n (h d)', h=h)
        return self.to_out(out)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    global einsum
    query = torch.as_tensor(activations["query"])
    context = torch.as_tensor(activations["context"])
    B, Q, Cq = query.shape
    K, Cctx = context.shape[1], context.shape[2]
    D = parameters["w_q"].shape[1] // heads
    layer = CrossAttention(Cq, Cctx, heads=heads, dim_head=D).to(query.dtype).eval()  # eval: no dropout
    # nn.Linear's weight[out][in] is the kit's W[d_in][d_out] transposed; an absent bias is 0.
    # functional_call keeps the kit's tensors in the graph, so their gradients are the layer's.
    b_o = parameters.get("b_o")
    weights = {
        "to_q.weight": torch.as_tensor(parameters["w_q"]).T,
        "to_k.weight": torch.as_tensor(parameters["w_k"]).T,
        "to_v.weight": torch.as_tensor(parameters["w_v"]).T,
        "to_out.0.weight": torch.as_tensor(parameters["w_o"]).T,
        "to_out.0.bias": torch.as_tensor(b_o) if b_o is not None else torch.zeros(Cq, dtype=query.dtype),
    }
    # the layer's mask is a key mask [B, K] (True = allowed); query_mask, attention_mask and
    # causal have nowhere to go
    key_mask = (masks or {}).get("key_mask")
    key_mask = None if key_mask is None else torch.as_tensor(key_mask, dtype=torch.bool)
    seen, plain = [], einsum

    def recorded(pattern, *operands):  # the weights are what the layer multiplies the values by
        if pattern == "b i j, b j d -> b i d":
            seen.append(operands[0])
        return plain(pattern, *operands)

    einsum = recorded
    try:
        out = torch.func.functional_call(layer, weights, (query,), {"context": context, "mask": key_mask})
    finally:
        einsum = plain
    return out, seen[0].reshape(B, heads, Q, K)
