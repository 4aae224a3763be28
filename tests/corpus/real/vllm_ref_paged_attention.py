# attn-kit: paged-attention
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/vllm-project/vllm
#   path tests/kernels/test_attention.py: ref_masked_attention, ref_single_query_cached_kv_attention
#   (the reference the paged-attention kernels are tested against)
#   commit 00f5113a694671453813543d2f4bf7fe02dfd5a7
# Licence: Apache-2.0. Copyright contributors to the vLLM project.
#   The licence's full text: tests/corpus/real/LICENSES/vllm-project-vllm.txt
import numpy as np

# ---- verbatim ----
import random
from typing import List, Optional, Tuple

import torch
# (pytest, xformers and vllm's compiled ops, used only by the tests themselves, are left out)


def ref_masked_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scale: float,
    attn_mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    attn_weights = scale * torch.einsum("qhd,khd->hqk", query, key).float()
    if attn_mask is not None:
        attn_weights = attn_weights + attn_mask.float()
    attn_weights = torch.softmax(attn_weights, dim=-1).to(value.dtype)
    out = torch.einsum("hqk,khd->qhd", attn_weights, value)
    return out


def ref_single_query_cached_kv_attention(
    output: torch.Tensor,
    query: torch.Tensor,
    num_queries_per_kv: int,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    alibi_slopes: Optional[torch.Tensor],
) -> None:
    num_query_heads = query.shape[1]
    num_kv_heads = value_cache.shape[1]
    head_size = value_cache.shape[2]
    block_size = value_cache.shape[3]
    num_seqs = query.shape[0]

    block_tables = block_tables.cpu().tolist()
    context_lens = context_lens.cpu().tolist()
    for i in range(num_seqs):
        q = query[i].unsqueeze(0)
        block_table = block_tables[i]
        context_len = int(context_lens[i])

        keys = []
        values = []
        for j in range(context_len):
            block_number = int(block_table[j // block_size])
            block_offset = j % block_size

            k = key_cache[block_number, :, :, block_offset, :]
            k = k.reshape(num_kv_heads, head_size)
            keys.append(k)

            v = value_cache[block_number, :, :, block_offset]
            values.append(v)
        keys = torch.stack(keys, dim=0)
        values = torch.stack(values, dim=0)
        if num_queries_per_kv > 1:
            # Handle MQA and GQA
            keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
            values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)

        alibi_bias = None
        if alibi_slopes is not None:
            # Create the ALiBi bias used in the paged attention kernel.
            position_ids = torch.arange(context_len, device=query.device).int()
            alibi_bias = (position_ids - context_len + 1).float()
            alibi_bias = alibi_slopes.view(-1, 1, 1) * alibi_bias.view(
                1, 1, -1)

        out = ref_masked_attention(q, keys, values, scale, alibi_bias)
        out = out.view(num_query_heads, head_size)
        output[i].copy_(out, non_blocking=True)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
# The reference computes its softmax in float32 (.float()), as it is written for half, bfloat16
# and float32 caches: it runs in float32 here, and its float32 results are returned as they are.
def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = torch.as_tensor(np.asarray(q, dtype=np.float32))  # B×H×d
    k_pool = torch.as_tensor(np.asarray(k_pool, dtype=np.float32))  # N×block_size×H×d
    v_pool = torch.as_tensor(np.asarray(v_pool, dtype=np.float32))
    N, block_size, H, d = k_pool.shape
    # vLLM's layouts: key_cache [N, H, d/x, block_size, x] (x = 1 here), value_cache [N, H, d, block_size]
    key_cache = k_pool.reshape(N, block_size, H, d, 1).permute(0, 2, 3, 1, 4)
    value_cache = v_pool.permute(0, 2, 3, 1)
    # a table tensor is rectangular: shorter tables are padded with block 0, never read
    tables = [[int(b) for b in t] for t in block_tables]
    width = max([len(t) for t in tables] + [1])
    tables = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int64)
    output = torch.empty_like(q)
    lens = torch.tensor([int(n) for n in context_lens], dtype=torch.int64)
    ref_single_query_cached_kv_attention(output, q, 1, key_cache, value_cache, tables, lens, float(1.0 / d**0.5), None)
    return output.numpy()
