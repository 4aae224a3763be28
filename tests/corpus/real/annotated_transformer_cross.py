# attn-kit: cross-attention
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/harvardnlp/annotated-transformer
#   path the_annotated_transformer.py: clones, attention, MultiHeadedAttention
#   commit debc9fd747bb2123160a98046ad1c2d4da44a567
# Licence: MIT. Copyright (c) 2018 Alexander Rush
#   The licence's full text: tests/corpus/real/LICENSES/harvardnlp-annotated-transformer.txt
import copy
import math

import numpy as np
import torch
import torch.nn as nn

# ---- verbatim ----
def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        "Take in model size and number of heads."
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        "Implements Figure 2"
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(
            query, key, value, mask=mask, dropout=self.dropout
        )

        # 3) "Concat" using a view and apply a final linear.
        x = (
            x.transpose(1, 2)
            .contiguous()
            .view(nbatches, -1, self.h * self.d_k)
        )
        del query
        del key
        del value
        return self.linears[-1](x)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def _load(linear, W, b):
    """The kit's W[d_in][d_out] into nn.Linear's weight[out][in]; an absent bias is 0."""
    with torch.no_grad():
        linear.weight.copy_(_t(W).T)
        linear.bias.copy_(_t(b) if b is not None else torch.zeros_like(linear.bias))


def cross_attention(x, context, params, num_heads, mask=None, return_weights=False):
    x, context = _t(x), _t(context)
    layer = MultiHeadedAttention(num_heads, x.shape[-1]).double().eval()  # eval: no dropout
    for lin, w in zip(layer.linears, "qkvo"):
        _load(lin, params[f"W{w}"], params.get(f"b{w}"))
    allowed = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))  # True = allowed, as here
    with torch.no_grad():
        out = layer(x, context, context, mask=allowed)
    out = out.numpy()
    return (out, layer.attn.numpy()) if return_weights else out
