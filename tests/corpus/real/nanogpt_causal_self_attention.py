# attn-kit: mha-screen
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/karpathy/nanoGPT
#   path model.py: class CausalSelfAttention (and its imports)
#   commit 3adf61e154c3fe3fca428ad6bc3818b27a3b8291
# Licence: MIT. Copyright (c) 2022 Andrej Karpathy
#   The licence's full text: tests/corpus/real/LICENSES/karpathy-nanoGPT.txt
import numpy as np

# ---- verbatim ----
import math
import inspect
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F
class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                        .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y
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

class _Config:  # the dims the layer's constructor reads
    def __init__(self, n_embd, n_head, block_size):
        self.n_embd, self.n_head, self.block_size = n_embd, n_head, block_size
        self.bias, self.dropout = True, 0.0


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(np.asarray(x, dtype=np.float64))
    B, T, D = x.shape
    layer = CausalSelfAttention(_Config(D, num_heads, T)).double().eval()
    f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    zero = torch.zeros(D, dtype=torch.float64)
    with torch.no_grad():  # c_attn holds [Wq | Wk | Wv] as nn.Linear's weight[out][in]; no bias = 0
        layer.c_attn.weight.copy_(torch.cat([f64(params[w]) for w in ("Wq", "Wk", "Wv")], dim=1).T)
        layer.c_attn.bias.copy_(torch.cat([f64(params[b]) if params.get(b) is not None else zero for b in ("bq", "bk", "bv")]))
        layer.c_proj.weight.copy_(f64(params["Wo"]).T)
        layer.c_proj.bias.copy_(f64(params["bo"]) if params.get("bo") is not None else zero)
    if return_weights:  # scaled_dot_product_attention returns no weights
        raise NotImplementedError("this layer computes attention with scaled_dot_product_attention, which returns no weights")
    # the layer's forward takes no mask: `mask` has nowhere to go
    with torch.no_grad():
        return layer(x).numpy()
