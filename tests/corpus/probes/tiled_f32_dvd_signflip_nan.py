# attn-kit: tiled-softmax
"""A FlashAttention-style port: float32 running statistics, the accumulator shaped like q (so it
supports only dv = d), the online rescale with its sign flipped (exp(m_new - m_old)), and a query
with no allowed key divided 0 by 0 (NaN)."""
import math

import torch


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    q, k, v = (torch.as_tensor(a).float() for a in (q, k, v))
    allowed = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    o = torch.zeros_like(q)
    row_max = torch.full((q.shape[0], 1), -math.inf)
    row_sum = torch.zeros((q.shape[0], 1))
    for lo in range(0, k.shape[0], block_size):
        s = q @ k[lo : lo + block_size].T / math.sqrt(q.shape[1])
        if allowed is not None:
            s = s.masked_fill(~allowed[:, lo : lo + block_size], -math.inf)
        new_max = torch.maximum(row_max, s.max(dim=1, keepdim=True).values)
        p = torch.exp(s - new_max).nan_to_num(0.0)
        fix = torch.exp(new_max - row_max).nan_to_num(0.0)
        fix = torch.where(torch.isinf(row_max), torch.zeros_like(fix), fix)
        row_sum = row_sum * fix + p.sum(dim=1, keepdim=True)
        o = o * fix + p @ v[lo : lo + block_size]
        row_max = new_max
    return (o / row_sum).numpy()
