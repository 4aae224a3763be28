# attn-kit: kv-cache
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/rasbt/LLMs-from-scratch
#   path ch04/03_kv-cache/gpt_with_kv_cache.py: MultiHeadAttention (with its KV cache)
#   commit 28c65cdfbc3338e2e040016eea4b7fdf556e4d57
# Licence: Apache-2.0. Copyright (c) Sebastian Raschka
#   The licence's full text: tests/corpus/real/LICENSES/rasbt-LLMs-from-scratch.txt
import numpy as np

# ---- verbatim ----
# This file collects all the relevant code that we covered thus far
# throughout Chapters 3-4.
# This file can be run as a standalone script.
import torch
import torch.nn as nn

# (import time, tiktoken: used only by the script's generation loop)

#####################################
# Chapter 3
#####################################
class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # Reduce the projection dim to match desired output dim

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # Linear layer to combine head outputs
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask",
            torch.triu(torch.ones(context_length, context_length), diagonal=1),
            persistent=False
        )

        ####################################################
        # NEW
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0
        ####################################################

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape

        keys_new = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        values_new = self.W_value(x)
        queries = self.W_query(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys_new = keys_new.view(b, num_tokens, self.num_heads, self.head_dim)
        values_new = values_new.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        ####################################################
        # NEW
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=1)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=1)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new
        ####################################################

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        ####################################################
        # NEW
        num_tokens_Q = queries.shape[-2]
        num_tokens_K = keys.shape[-2]
        if use_cache:
            mask_bool = self.mask.bool()[
                self.ptr_current_pos:self.ptr_current_pos + num_tokens_Q, :num_tokens_K
            ]
            self.ptr_current_pos += num_tokens_Q
        ####################################################
        # Original mask truncated to the number of tokens and converted to boolean
        else:
            mask_bool = self.mask.bool()[:num_tokens_Q, :num_tokens_K]

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec

    ####################################################
    # NEW
    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
    ####################################################
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def decode_step(x_t, params, num_heads, cache=None):
    x = torch.as_tensor(np.asarray(x_t, dtype=np.float64))[:, None, :]  # B×D -> B×1×D
    B, _, D = x.shape
    past = 0 if cache is None else np.asarray(cache["k"]).shape[1]
    layer = MultiHeadAttention(D, D, past + 1, 0.0, num_heads, qkv_bias=True).double().eval()  # its qkv_bias option
    f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    with torch.no_grad():  # nn.Linear's weight[out][in] is the kit's W[d_in][d_out] transposed; no bias = 0
        for name, w in (("W_query", "q"), ("W_key", "k"), ("W_value", "v"), ("out_proj", "o")):
            lin = getattr(layer, name)
            lin.weight.copy_(f64(params[f"W{w}"]).T)
            b = params.get(f"b{w}")
            lin.bias.copy_(f64(b) if b is not None else torch.zeros(D, dtype=torch.float64))
    if cache is not None:  # the cache crosses calls as NumPy arrays [B, t, H, hd]; its position is t
        layer.cache_k, layer.cache_v = f64(cache["k"]), f64(cache["v"])
        layer.ptr_current_pos = past
    with torch.no_grad():
        out = layer(x, use_cache=True)
    return out[:, 0].numpy(), {"k": layer.cache_k.numpy(), "v": layer.cache_v.numpy()}
