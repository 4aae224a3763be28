# attn-kit: paged-attention
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/vllm-project/vllm
#   path tests/kernels/attention/test_flashinfer.py: ref_paged_attn (the reference FlashInfer's paged
#   decode is tested against; the stored version imports vllm.utils.torch_utils.set_random_seed)
# Licence: Apache-2.0. SPDX-FileCopyrightText: Copyright contributors to the vLLM project
#   The licence's full text: tests/corpus/real/LICENSES/vllm-project-vllm.txt
import numpy as np

# ---- verbatim ----
import torch
# (pytest, flashinfer and vllm's own helpers, used only by the tests, are left out)


def ref_paged_attn(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    query_lens: list[int],
    kv_lens: list[int],
    block_tables: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
) -> torch.Tensor:
    num_seqs = len(query_lens)
    block_tables = block_tables.cpu().numpy()
    _, block_size, num_kv_heads, head_size = key_cache.shape

    outputs: list[torch.Tensor] = []
    start_idx = 0
    for i in range(num_seqs):
        query_len = query_lens[i]
        kv_len = kv_lens[i]
        q = query[start_idx : start_idx + query_len]
        q *= scale

        num_kv_blocks = (kv_len + block_size - 1) // block_size
        block_indices = block_tables[i, :num_kv_blocks]

        k = key_cache[block_indices].view(-1, num_kv_heads, head_size)
        k = k[:kv_len]
        v = value_cache[block_indices].view(-1, num_kv_heads, head_size)
        v = v[:kv_len]

        if q.shape[1] != k.shape[1]:
            k = torch.repeat_interleave(k, q.shape[1] // k.shape[1], dim=1)
            v = torch.repeat_interleave(v, q.shape[1] // v.shape[1], dim=1)
        attn = torch.einsum("qhd,khd->hqk", q, k).float()
        empty_mask = torch.ones(query_len, kv_len)
        mask = torch.triu(empty_mask, diagonal=kv_len - query_len + 1).bool()
        if sliding_window is not None:
            sliding_window_mask = (
                torch.triu(
                    empty_mask, diagonal=kv_len - (query_len + sliding_window) + 1
                )
                .bool()
                .logical_not()
            )
            mask |= sliding_window_mask
        if soft_cap is not None:
            attn = soft_cap * torch.tanh(attn / soft_cap)
        attn.masked_fill_(mask, float("-inf"))
        attn = torch.softmax(attn, dim=-1).to(v.dtype)
        out = torch.einsum("hqk,khd->qhd", attn, v)

        outputs.append(out)
        start_idx += query_len

    return torch.cat(outputs, dim=0)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    # The pools already have its layout [N, block_size, H, d]; one query per sequence. The arrays are
    # handed over as they are (torch.as_tensor shares a float64 array's memory, as a caller's tensor would).
    query = torch.as_tensor(np.asarray(q))
    key_cache = torch.as_tensor(np.asarray(k_pool))
    value_cache = torch.as_tensor(np.asarray(v_pool))
    # a table tensor is rectangular: shorter tables are padded with block 0, never read
    tables = [[int(b) for b in t] for t in block_tables]
    width = max([len(t) for t in tables] + [1])
    tables = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int64)
    lens = [int(n) for n in context_lens]
    d = query.shape[-1]
    out = ref_paged_attn(query, key_cache, value_cache, [1] * len(lens), lens, tables, d**-0.5)
    return out.numpy()
