# attn-kit: mha-screen
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/labmlai/annotated_deep_learning_paper_implementations
#   path labml_nn/transformers/mha.py: PrepareForMultiHeadAttention, MultiHeadAttention (both define __call__)
#   commit 18298f68cfc79f8da910913463b3270ed3c7cf65
# Licence: MIT. Copyright (c) 2020 Varuna Jayasiri
#   The licence's full text: tests/corpus/real/LICENSES/labmlai-annotated_deep_learning_paper_implementations.txt
import numpy as np

# ---- verbatim ----
import math
from typing import Optional

import torch
# (from labml import tracker: a stand-in, tracker.debug only logs)
class tracker:  # noqa: N801
    @staticmethod
    def debug(*args, **kwargs):
        pass
from torch import nn as nn
from torch.nn import functional as F

# (from labml_helpers.module import Module: a stand-in, labml's Module is a torch.nn.Module)
Module = nn.Module


class PrepareForMultiHeadAttention(Module):
    def __init__(self, d_model: int, heads: int, d_k: int, bias: bool):
        super().__init__()
        self.linear = nn.Linear(d_model, heads * d_k, bias=bias)
        self.heads = heads
        self.d_k = d_k

    def __call__(self, x: torch.Tensor):
        seq_len, batch_size, _ = x.shape

        x = self.linear(x)
        x = x.view(seq_len, batch_size, self.heads, self.d_k)

        return x


class MultiHeadAttention(Module):
    def __init__(self, heads: int, d_model: int, dropout_prob: float = 0.1, bias: bool=True):
        """
        ### Multi-Head Attention

        This computes multi-headed attention for given `query`, `key` and `value` vectors.
        `heads` is the number of heads.
        `d_model` is the number of features in the `query`, `key` and `value` vectors.
        """

        super().__init__()
        self.d_k = d_model // heads
        self.heads = heads

        # These transformer the `query`, `key` and `value` vectors for multi-headed attention/
        self.query = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)
        self.key = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)
        self.value = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)

        # Output layer
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout_prob)
        self.scale = 1 / math.sqrt(self.d_k)

        # We store attentions so that it can used for logging, or other computations if needed
        self.attn = None

    def get_scores(self, query: torch.Tensor, key: torch.Tensor):
        """
        ### Calculate scores between queries and keys
        """
        return torch.einsum('ibhd,jbhd->ijbh', query, key)

    def __call__(self, *,
                 query: torch.Tensor,
                 key: torch.Tensor,
                 value: torch.Tensor,
                 mask: Optional[torch.Tensor] = None):
        # `query`, `key` and `value`  have shape `[seq_len, batch_size, d_model]`
        seq_len, batch_size, _ = query.shape

        if mask is not None:
            # `mask` has shape `[seq_len, seq_len, batch_size]`,
            # where first dimension is the query dimension.
            # If the query dimension is equal to $`$ it will be broadcasted to match
            assert mask.shape[0] == 1 or mask.shape[0] == mask.shape[1]

            # Same mask applied to all `h` heads.
            mask = mask.unsqueeze(-1)

        # Prepare `query`, `key` and `value` for attention computation
        # These will then have shape `[seq_len, batch_size, heads, d_k]`
        query = self.query(query)
        key = self.key(key)
        value = self.value(value)

        # Compute attention scores
        scores = self.get_scores(query, key)

        # Scale scores
        scores *= self.scale

        # Apply mask
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)

        # $softmax$ attention
        attn = F.softmax(scores, dim=1)

        # Save attentions if debugging
        tracker.debug('attn', attn)

        # Apply dropout
        attn = self.dropout(attn)

        # Calculate the attention results
        x = torch.einsum("ijbh,jbhd->ibhd", attn, value)

        # Save attentions for any other calculations 
        self.attn = attn.detach()

        # Concatenate multiple heads
        x = x.reshape(seq_len, batch_size, -1)

        # Output layer
        return self.output(x)
# ---- end verbatim ----


# ---- adapter (attn-kit) ----
# The original has no softmax, causal_mask or padding_mask of this interface; these three are
# written by attn-kit, plainly and correctly, so that the checks judge the original layer.
def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    keep = np.ones(s.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if not keep.any():
        return [0.0] * len(s)
    e = np.where(keep, np.exp(np.where(keep, s, 0.0) - s[keep].max()), 0.0)
    return list(e / e.sum())


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]
def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(np.asarray(x, dtype=np.float64))
    B, T, D = x.shape
    layer = MultiHeadAttention(num_heads, D, dropout_prob=0.0, bias=True).double().eval()
    f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    with torch.no_grad():  # nn.Linear's weight[out][in] is the kit's W[d_in][d_out] transposed; no bias = 0
        for lin, w in ((layer.query.linear, "q"), (layer.key.linear, "k"), (layer.value.linear, "v"), (layer.output, "o")):
            lin.weight.copy_(f64(params[f"W{w}"]).T)
            b = params.get(f"b{w}")
            lin.bias.copy_(f64(b) if b is not None else torch.zeros(D, dtype=torch.float64))
    seq_first = x.transpose(0, 1)  # labml's layout: [seq_len, batch_size, d_model]
    # its mask is [seq_q, seq_k, batch] with nonzero = allowed
    its_mask = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool)).permute(1, 2, 0)
    with torch.no_grad():
        out = layer(query=seq_first, key=seq_first, value=seq_first, mask=its_mask).transpose(0, 1).numpy()
    if not return_weights:
        return out
    return out, layer.attn.permute(2, 3, 0, 1).numpy()  # [i, j, b, h] -> B×H×T×T
