# attn-kit: mha-masked-bias
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/lucidrains/perceiver-pytorch
#   path perceiver_pytorch/perceiver_pytorch.py: exists, default, l1norm, Attention (and its imports)
#   commit 96097c6a27cc64fc1f196d3a58d32b8a82f573e1
# Licence: MIT. Copyright (c) 2021 Phil Wang
#   The licence's full text: tests/corpus/real/LICENSES/lucidrains-perceiver-pytorch.txt
# ---- verbatim ----
from __future__ import annotations
from math import pi, log
from functools import wraps

import torch
from torch import nn, einsum, stack, cat
from torch.nn import Module, ModuleList
import torch.nn.functional as F

# (from einops import rearrange, repeat: see the stand-in below)

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

# helpers

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def l1norm(t, dim = -1, eps = 1e-8):
    return F.normalize(t, p = 1, dim = dim, eps = eps)

class Attention(nn.Module):
    def __init__(self, query_dim, context_dim = None, heads = 8, dim_head = 64, dropout = 0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias = False)

        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, x, context = None, mask = None, inverted_attention = False):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k, v = self.to_kv(context).chunk(2, dim = -1)

        q, k, v = (rearrange(t, 'b n (h d) -> (b h) n d', h = h) for t in (q, k, v))

        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale

        if exists(mask):
            mask = rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = repeat(mask, 'b j -> (b h) () j', h = h)
            sim.masked_fill_(~mask, max_neg_value)

        # attention, what we cannot get enough of

        if inverted_attention:
            attn = sim.softmax(dim = -2)

            if exists(mask):
                attn = attn.masked_fill(~mask, 0.)

            attn = l1norm(attn)
        else:
            attn = sim.softmax(dim = -1)

        attn = self.dropout(attn)

        # aggregate

        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b h) n d -> b n (h d)', h = h)
        return self.to_out(out)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = torch.as_tensor(activations["query"])
    context = torch.as_tensor(activations["context"])
    B, Q, Cq = query.shape
    K, Cctx = context.shape[1], context.shape[2]
    D = parameters["w_q"].shape[1] // heads
    layer = Attention(Cq, Cctx, heads=heads, dim_head=D).to(query.dtype).eval()  # eval: no dropout
    # nn.Linear's weight[out][in] is the kit's W[d_in][d_out] transposed; to_kv holds [w_k | w_v].
    # functional_call keeps the kit's tensors in the graph, so their gradients are the layer's.
    b_o = parameters.get("b_o")
    weights = {
        "to_q.weight": torch.as_tensor(parameters["w_q"]).T,
        "to_kv.weight": torch.cat([torch.as_tensor(parameters["w_k"]), torch.as_tensor(parameters["w_v"])], dim=1).T,
        "to_out.weight": torch.as_tensor(parameters["w_o"]).T,
        "to_out.bias": torch.as_tensor(b_o) if b_o is not None else torch.zeros(Cq, dtype=query.dtype),
    }
    seen = []  # the attention weights, read where the layer hands them to its dropout
    layer.dropout.register_forward_hook(lambda module, args, out: seen.append(out))
    # the layer's mask is a key mask [B, K] (True = allowed); query_mask, attention_mask and
    # causal have nowhere to go
    key_mask = (masks or {}).get("key_mask")
    key_mask = None if key_mask is None else torch.as_tensor(key_mask, dtype=torch.bool)
    out = torch.func.functional_call(layer, weights, (query,), {"context": context, "mask": key_mask})
    return out, seen[0].reshape(B, heads, Q, K)
