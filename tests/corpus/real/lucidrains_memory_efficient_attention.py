# attn-kit: tiled-softmax
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/lucidrains/memory-efficient-attention-pytorch
#   path memory_efficient_attention_pytorch/memory_efficient_attention.py: exists, default, summarize_qkv_chunk, memory_efficient_attention (Rabe and Staats' chunked attention)
#   commit d54f391370ecbf843a871f0e260425d076995550
# Licence: MIT. Copyright (c) 2022 Phil Wang
#   The licence's full text: tests/corpus/real/LICENSES/lucidrains-memory-efficient-attention-pytorch.txt
import numpy as np

# ---- verbatim ----
import torch
from functools import partial
from torch import nn, einsum
from torch.utils.checkpoint import checkpoint
import torch.nn.functional as F

# (from einops import rearrange: a stand-in for the patterns used, as einops is not installed here)
def rearrange(t, pattern):
    if pattern == "b j -> b 1 1 j":
        return t[:, None, None, :]
    if pattern == "... 1 -> ...":
        return t.squeeze(-1)
    if pattern == "... c -> ... 1 c":
        return t.unsqueeze(-2)
    if pattern == "... -> ... 1":
        return t.unsqueeze(-1)
    raise NotImplementedError(pattern)

# helper functions

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

# memory efficient attention

def summarize_qkv_chunk(q, k, v, mask, attn_bias_chunk, causal, qk_start_indices, dropout):
    q_start_index, k_start_index, q_chunk_size, k_chunk_size, device = *qk_start_indices, q.shape[-2], k.shape[-2], q.device

    weight = einsum('b h i d, b h j d -> b h i j', q, k)

    if exists(attn_bias_chunk):
        weight = weight + attn_bias_chunk

    mask_value = -torch.finfo(weight.dtype).max

    if exists(mask):
        mask = rearrange(mask, 'b j -> b 1 1 j')
        weight = weight.masked_fill(~mask, mask_value)

    if causal and q_start_index < (k_start_index + k_chunk_size - 1):
        causal_mask = torch.ones((q_chunk_size, k_chunk_size), dtype = torch.bool, device = device).triu(q_start_index - k_start_index + 1)
        weight = weight.masked_fill(causal_mask, mask_value)

    weight_max = weight.amax(dim = -1, keepdim = True).detach()
    weight = weight - weight_max

    exp_weight = weight.exp()

    exp_weight = F.dropout(exp_weight, p = dropout)

    weighted_value = einsum('b h i j, b h j d -> b h i d', exp_weight, v)

    return exp_weight.sum(dim = -1), weighted_value, rearrange(weight_max, '... 1 -> ...')

checkpointed_summarize_qkv_chunk = partial(checkpoint, summarize_qkv_chunk)

def memory_efficient_attention(
    q, k, v,
    mask = None,
    causal = False,
    attn_bias = None,
    q_bucket_size = 512,
    k_bucket_size = 1024,
    eps = 1e-8,
    dropout = 0.,
    training = False
):
    scale = q.shape[-1] ** -0.5
    q = q * scale

    # function

    needs_backwards = q.requires_grad or k.requires_grad or v.requires_grad
    summarize_qkv_fn = checkpointed_summarize_qkv_chunk if needs_backwards else summarize_qkv_chunk

    # chunk all the inputs

    q_chunks = q.split(q_bucket_size, dim = -2)
    k_chunks = k.split(k_bucket_size, dim = -2)
    v_chunks = v.split(k_bucket_size, dim = -2)
    mask_chunks = mask.split(k_bucket_size, dim = -1) if exists(mask) else ((None,) * len(k_chunks))

    if exists(attn_bias):
        i, j = attn_bias.shape[-2:]
        attn_bias_chunks = attn_bias.split(q_bucket_size, dim = -2)
        attn_bias_chunks = list(map(lambda t: t.split(k_bucket_size, dim = -1), attn_bias_chunks))

    # loop through all chunks and accumulate

    out = []
    for q_index, q_chunk in enumerate(q_chunks):
        exp_weights = []
        weighted_values = []
        weight_maxes = []

        for k_index, (k_chunk, v_chunk, mask_chunk) in enumerate(zip(k_chunks, v_chunks, mask_chunks)):
            q_start_index = q_index * q_bucket_size
            k_start_index = k_index * k_bucket_size

            if causal and k_start_index > (q_start_index + q_chunk.shape[-2] - 1):
                # if chunk is to be all masked out causally, skip
                continue

            attn_bias_chunk = attn_bias_chunks[q_index][k_index] if exists(attn_bias) else None

            exp_weight_chunk, weighted_value_chunk, weight_max_chunk = summarize_qkv_fn(
                q_chunk,
                k_chunk,
                v_chunk,
                mask_chunk,
                attn_bias_chunk,
                causal,
                (q_start_index, k_start_index),
                dropout if training else 0.
            )

            exp_weights.append(exp_weight_chunk)
            weighted_values.append(weighted_value_chunk)
            weight_maxes.append(weight_max_chunk)

        weight_maxes = torch.stack(weight_maxes, dim = -1)

        weighted_values = torch.stack(weighted_values, dim = -1)
        exp_weights = torch.stack(exp_weights, dim = -1)

        global_max = weight_maxes.amax(dim = -1, keepdim = True)
        renorm_factor = (weight_maxes - global_max).exp().detach()

        exp_weights = exp_weights * renorm_factor
        weighted_values = weighted_values * rearrange(renorm_factor, '... c -> ... 1 c')

        all_values = weighted_values.sum(dim = -1)
        all_weights = exp_weights.sum(dim = -1)

        normalized_values = all_values / (rearrange(all_weights, '... -> ... 1') + eps)
        out.append(normalized_values)

    return torch.cat(out, dim = -2)

# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def tiled_attention(q, k, v, mask=None, block_size=64):
    # it takes [b, h, n, d] and a key mask [b, j] (True = allowed); one head here. A T×S mask whose
    # rows are all the same is a key mask; any other has no way in.
    t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))[None, None]  # noqa: E731
    key_mask = None
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if not (m == m[:1]).all():
            raise NotImplementedError("this function masks keys only: a mask whose rows differ cannot be expressed")
        key_mask = torch.as_tensor(m[:1])
    out = memory_efficient_attention(t(q), t(k), t(v), mask=key_mask, q_bucket_size=block_size, k_bucket_size=block_size)
    return out[0, 0].numpy()
