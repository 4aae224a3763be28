# attn-kit: mha-masked-bias
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/harvardnlp/annotated-transformer
#   path the_annotated_transformer.py: clones, attention, MultiHeadedAttention
#   commit debc9fd747bb2123160a98046ad1c2d4da44a567
# Licence: MIT. Copyright (c) 2018 Alexander Rush
#   The licence's full text: tests/corpus/real/LICENSES/harvardnlp-annotated-transformer.txt
import copy
import math

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
def _one_mask(masks, B, Q, K):
    """The layer takes one mask (nonzero = allowed): the present masks, intersected, as [B,1|H,Q,K]."""
    masks = masks or {}
    allowed = torch.ones((B, 1, Q, K), dtype=torch.bool)
    if masks.get("key_mask") is not None:
        allowed = allowed & torch.as_tensor(masks["key_mask"], dtype=torch.bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        allowed = allowed & torch.as_tensor(masks["query_mask"], dtype=torch.bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        allowed = allowed & torch.as_tensor(masks["attention_mask"], dtype=torch.bool)
    return allowed


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = torch.as_tensor(activations["query"])
    context = torch.as_tensor(activations["context"])
    B, Q, d_model = query.shape
    layer = MultiHeadedAttention(heads, d_model).to(query.dtype).eval()  # eval: no dropout
    # the kit's W[d_in][d_out] is nn.Linear's weight[out][in] transposed; an absent bias is 0.
    # functional_call keeps the kit's tensors in the graph, so their gradients are the layer's.
    weights = {}
    for n, w in enumerate("qkvo"):
        W, b = parameters[f"w_{w}"], parameters.get(f"b_{w}")
        weights[f"linears.{n}.weight"] = torch.as_tensor(W).T
        weights[f"linears.{n}.bias"] = torch.as_tensor(b) if b is not None else torch.zeros(W.shape[1], dtype=query.dtype)
    allowed = _one_mask(masks, B, Q, context.shape[1])  # [B,1,Q,K] or [B,H,Q,K]
    # the layer adds a head axis itself (mask.unsqueeze(1)): hand it [B,Q,K] when no mask is per head
    mask = allowed[:, 0] if allowed.shape[1] == 1 else allowed
    out = torch.func.functional_call(layer, weights, (query, context, context), {"mask": mask})
    return out, layer.attn
