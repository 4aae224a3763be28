# attn-kit: cross-attention
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/d2l-ai/d2l-en
#   path d2l/torch.py: masked_softmax, DotProductAttention, MultiHeadAttention (Dive into Deep Learning's own code)
#   commit 23d7a5aecceee57d1292c56e90cce307f183bb0a
# Licence: MIT-0. Copyright 2019 Amazon.com, Inc. or its affiliates. All Rights Reserved.
#   The licence's full text: tests/corpus/real/LICENSES/d2l-ai-d2l-en-samplecode.txt
import numpy as np

# ---- verbatim ----
import math
import torch
from torch import nn


class d2l:  # (stand-in for the d2l package namespace the classes refer to; d2l.Module is an nn.Module)
    Module = nn.Module


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis.

    Defined in :numref:`sec_attention-scoring-functions`"""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32,
                            device=X.device)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)

class DotProductAttention(nn.Module):
    """Scaled dot product attention.

    Defined in :numref:`subsec_batch_dot`"""
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    # Shape of queries: (batch_size, no. of queries, d)
    # Shape of keys: (batch_size, no. of key-value pairs, d)
    # Shape of values: (batch_size, no. of key-value pairs, value dimension)
    # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        # Swap the last two dimensions of keys with keys.transpose(1, 2)
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)

d2l.DotProductAttention = DotProductAttention  # (stand-in, as above)


class MultiHeadAttention(d2l.Module):
    """Multi-head attention.

    Defined in :numref:`sec_multihead-attention`"""
    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__()
        self.num_heads = num_heads
        self.attention = d2l.DotProductAttention(dropout)
        self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        # Shape of queries, keys, or values:
        # (batch_size, no. of queries or key-value pairs, num_hiddens)
        # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
        # After transposing, shape of output queries, keys, or values:
        # (batch_size * num_heads, no. of queries or key-value pairs,
        # num_hiddens / num_heads)
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))

        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for num_heads
            # times, then copy the next item, and so on
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)

        # Shape of output: (batch_size * num_heads, no. of queries,
        # num_hiddens / num_heads)
        output = self.attention(queries, keys, values, valid_lens)
        # Shape of output_concat: (batch_size, no. of queries, num_hiddens)
        output_concat = self.transpose_output(output)
        return self.W_o(output_concat)

    def transpose_qkv(self, X):
        """Transposition for parallel computation of multiple attention heads.
    
        Defined in :numref:`sec_multihead-attention`"""
        # Shape of input X: (batch_size, no. of queries or key-value pairs,
        # num_hiddens). Shape of output X: (batch_size, no. of queries or
        # key-value pairs, num_heads, num_hiddens / num_heads)
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        # Shape of output X: (batch_size, num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        X = X.permute(0, 2, 1, 3)
        # Shape of output: (batch_size * num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        return X.reshape(-1, X.shape[2], X.shape[3])
    

    def transpose_output(self, X):
        """Reverse the operation of transpose_qkv.
    
        Defined in :numref:`sec_multihead-attention`"""
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def _valid_lens(mask):
    """d2l masks by valid lengths: key j of query row (b, i) is allowed when j < valid_lens[b, i].
    A B×T×S mask whose every row is such a prefix is one; any other has no way in."""
    m = np.asarray(mask, dtype=bool)
    lens = m.sum(axis=-1)
    if not (m == (np.arange(m.shape[-1]) < lens[..., None])).all():
        raise NotImplementedError("d2l's attention masks by valid lengths: only prefix masks can be expressed")
    return torch.as_tensor(lens, dtype=torch.float64)


def cross_attention(x, context, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(np.asarray(x, dtype=np.float64))
    context = torch.as_tensor(np.asarray(context, dtype=np.float64))
    B, T, D = x.shape
    layer = MultiHeadAttention(D, num_heads, dropout=0.0, bias=True)  # its option for biased projections
    with torch.no_grad():  # LazyLinear takes its shapes from a first call
        layer(x[:, :1].float(), context[:, :1].float(), context[:, :1].float(), None)
    layer = layer.double().eval()
    f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    with torch.no_grad():  # the kit's W[d_in][d_out] is nn.Linear's weight[out][in] transposed; no bias = 0
        for name, w in (("W_q", "q"), ("W_k", "k"), ("W_v", "v"), ("W_o", "o")):
            lin = getattr(layer, name)
            lin.weight.copy_(f64(params[f"W{w}"]).T)
            b = params.get(f"b{w}")
            lin.bias.copy_(f64(b) if b is not None else torch.zeros(D, dtype=torch.float64))
    valid_lens = None if mask is None else _valid_lens(mask)
    with torch.no_grad():
        out = layer(x, context, context, valid_lens).numpy()
    if not return_weights:
        return out
    return out, layer.attention.attention_weights.reshape(B, num_heads, T, -1).numpy()
