# attn-kit: mha-masked-bias
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/mosaicml/llm-foundry
#   path llmfoundry/models/layers/attention.py: repeat_kv_for_gqa, scaled_multihead_dot_product_attention (MPT's torch attention)
#   commit 8c8dd48f72168c5d51e2f7b151595892a8fba43d
# Licence: Apache-2.0. Copyright 2022 MosaicML LLM Foundry authors
#   The licence's full text: tests/corpus/real/LICENSES/mosaicml-llm-foundry.txt
# ---- verbatim ----
# Copyright 2022 MosaicML LLM Foundry authors
# SPDX-License-Identifier: Apache-2.0
"""Attention layers."""

import copy
import math
import warnings
from typing import Any, Optional

import torch
# (import transformers, packaging, nn and llmfoundry's registries: not used by these functions)
# (from einops import rearrange: see the stand-in below)

# ---- stand-in for einops, which is not installed here: the patterns this file uses, nothing more ----
def rearrange(t, pattern, **axes):
    if pattern == "b s (h d) -> b h s d":
        b, s, hd = t.shape
        return t.reshape(b, s, axes["h"], hd // axes["h"]).permute(0, 2, 1, 3)
    if pattern == "b s (h d) -> b h d s":
        b, s, hd = t.shape
        return t.reshape(b, s, axes["h"], hd // axes["h"]).permute(0, 2, 3, 1)
    if pattern == "b h s d -> b s (h d)":
        b, h, s, d = t.shape
        return t.permute(0, 2, 1, 3).reshape(b, s, h * d)
    raise NotImplementedError(pattern)
# ---- end of the stand-in ----

def repeat_kv_for_gqa(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Perform repeat of kv heads along a particular dimension.

    hidden.shape expected to be: (batch size, seq len, kv_n_heads, head_dim)
    n_rep: amount of repetitions of kv_n_heads
    Unlike torch.repeat_interleave, this function avoids allocating new memory.
    """
    if n_rep == 1:
        return hidden

    b, s, kv_n_heads, d = hidden.shape

    hidden = hidden[:, :, :, None, :].expand(b, s, kv_n_heads, n_rep, d)

    return hidden.reshape(b, s, kv_n_heads * n_rep, d)



def scaled_multihead_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    n_heads: int,
    kv_n_heads: int,
    past_key_value: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
    softmax_scale: Optional[float] = None,
    attn_bias: Optional[torch.Tensor] = None,
    key_padding_mask: Optional[torch.Tensor] = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    training: bool = False,
    needs_weights: bool = False,
    attn_logit_softcapping: Optional[float] = None,
    sliding_window_size: int = -1,
) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[tuple[torch.Tensor,
                                                                torch.Tensor]]]:

    q = rearrange(query, 'b s (h d) -> b h s d', h=n_heads)
    k = rearrange(key, 'b s (h d) -> b h d s', h=kv_n_heads)
    v = rearrange(value, 'b s (h d) -> b h s d', h=kv_n_heads)

    if past_key_value is not None:
        # attn_impl: flash attn uses kernels which expect input shape [b, s, h, d_head].
        # kv_cache is therefore stored using that shape.
        # attn_impl: torch stores the kv_cache in the ordering which is most advantageous
        # for its attn computation ie
        # keys are stored as tensors with shape [b, h, d_head, s] and
        # values are stored as tensors with shape [b, h, s, d_head]
        if len(past_key_value) != 0:
            k = torch.cat([past_key_value[0], k], dim=3)
            v = torch.cat([past_key_value[1], v], dim=2)

        past_key_value = (k, v)

    b, _, s_q, d = q.shape
    s_k = k.size(-1)

    # grouped query case
    if kv_n_heads > 1 and kv_n_heads < n_heads:
        # necessary to do a transpose to swap (b h s d) -> (b s h d) for repeat_kv_for_gqa function
        k = repeat_kv_for_gqa(k.transpose(1, 2),
                              n_heads // kv_n_heads).transpose(1, 2)
        v = repeat_kv_for_gqa(v.transpose(1, 2),
                              n_heads // kv_n_heads).transpose(1, 2)

    if softmax_scale is None:
        softmax_scale = 1 / math.sqrt(d)

    attn_weight = q.matmul(k) * softmax_scale

    if attn_logit_softcapping is not None:
        attn_weight = attn_logit_softcapping * torch.tanh(
            attn_weight / attn_logit_softcapping,
        )

    if attn_bias is not None:
        # clamp to 0 necessary for torch 2.0 compile()
        _s_q = max(0, attn_bias.size(2) - s_q)
        _s_k = max(0, attn_bias.size(3) - s_k)
        attn_bias = attn_bias[:, :, _s_q:, _s_k:]

        if (attn_bias.size(-1) != 1 and attn_bias.size(-1)
            != s_k) or (attn_bias.size(-2) != 1 and attn_bias.size(-2) != s_q):
            raise RuntimeError(
                f'attn_bias (shape: {attn_bias.shape}) is expected to broadcast to shape: {attn_weight.shape}.',
            )
        attn_weight = attn_weight + attn_bias

    min_val = torch.finfo(q.dtype).min

    if key_padding_mask is not None:
        if attn_bias is not None:
            warnings.warn(
                'Propagating key_padding_mask to the attention module ' +\
                'and applying it within the attention module can cause ' +\
                'unnecessary computation/memory usage. Consider integrating ' +\
                'into attn_bias once and passing that to each attention ' +\
                'module instead.',
            )
        attn_weight = attn_weight.masked_fill(
            ~key_padding_mask.view((b, 1, 1, s_k)),
            min_val,
        )

    if is_causal and (not s_q == 1):
        s = max(s_q, s_k)
        causal_mask = attn_weight.new_ones(s, s, dtype=torch.float32)
        causal_mask = causal_mask.tril()
        causal_mask = causal_mask.to(torch.bool)
        causal_mask = ~causal_mask
        causal_mask = causal_mask[-s_q:, -s_k:]
        attn_weight = attn_weight.masked_fill(
            causal_mask.view(1, 1, s_q, s_k),
            min_val,
        )

    if sliding_window_size != -1:
        window_mask = torch.ones((s_q, s_k),
                                 dtype=torch.bool,
                                 device=attn_weight.device)
        if (not s_q == 1):
            if s_q != s_k:
                raise ValueError(
                    'Number of queries should be equal to the number of keys.',
                )
            window_mask = torch.tril(
                window_mask,
                diagonal=sliding_window_size,
            )
            window_mask = torch.triu(
                window_mask,
                diagonal=-sliding_window_size,
            )
        else:
            window_mask[:, :-(sliding_window_size + 1)] = False
        window_mask = ~window_mask
        attn_weight = attn_weight.masked_fill(
            window_mask.view(1, 1, s_q, s_k),
            min_val,
        )

    attn_weight = torch.softmax(attn_weight, dim=-1)

    if dropout_p:
        attn_weight = torch.nn.functional.dropout(
            attn_weight,
            p=dropout_p,
            training=training,
            inplace=True,
        )

    out = attn_weight.to(v.dtype).matmul(v)
    out = rearrange(out, 'b h s d -> b s (h d)')

    if needs_weights:
        return out, attn_weight, past_key_value
    return out, None, past_key_value

# ---- end verbatim ----


# ---- adapter (attn-kit) ----
# The original starts from projected q, k, v and ends before the output projection: the adapter
# projects (x @ W + b, the interface's own definition) and applies w_o, b_o. Everything between is
# the original's.
def _project(x, parameters, w, b):
    y = x @ torch.as_tensor(parameters[w])
    return y + torch.as_tensor(parameters[b]) if parameters.get(b) is not None else y


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = torch.as_tensor(activations["query"])
    context = torch.as_tensor(activations["context"])
    q = _project(query, parameters, "w_q", "b_q")
    k = _project(context, parameters, "w_k", "b_k")
    v = _project(context, parameters, "w_v", "b_v")
    bias = activations.get("bias")
    if bias is not None:  # the original indexes attn_bias as 4-D: leading axes of size 1
        bias = torch.as_tensor(bias)
        bias = bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape))
    # its masks: key_padding_mask [B, K] (True = allowed) and is_causal; query_mask and
    # attention_mask have nowhere to go
    key_mask = (masks or {}).get("key_mask")
    key_mask = None if key_mask is None else torch.as_tensor(key_mask, dtype=torch.bool)
    out, attention, _ = scaled_multihead_dot_product_attention(
        q, k, v, heads, heads, attn_bias=bias, key_padding_mask=key_mask, is_causal=causal, needs_weights=True
    )
    return _project(out, parameters, "w_o", "b_o"), attention
