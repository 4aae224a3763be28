# attn-kit: tiled-softmax
"""Key masks only (a mask whose rows differ raises), blocked scores set to -1e30 and kept after the
exponential (a query with no allowed key averages the values), no 1/sqrt(d): torch, one key
block at a time."""

import torch


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    q, k, v = (torch.as_tensor(a) for a in (q, k, v))
    q = q.double()
    keep = None
    if mask is not None:
        m = torch.as_tensor(mask, dtype=torch.bool)
        if not bool((m == m[:1]).all()):
            raise NotImplementedError("only key masks: every query must allow the same keys")
        keep = m[0]
    T, S = q.shape[0], k.shape[0]
    best = torch.full((T, 1), -torch.inf, dtype=torch.float64)
    total = torch.zeros((T, 1), dtype=torch.float64)
    acc = torch.zeros((T, v.shape[1]), dtype=torch.float64)
    for lo in range(0, S, block_size):
        s = q @ k[lo : lo + block_size].double().T
        if keep is not None:
            s = torch.where(keep[lo : lo + block_size][None], s, torch.full_like(s, -1e30))
        top = torch.maximum(best, s.max(dim=1, keepdim=True).values)
        fix = torch.exp(best - top)
        e = torch.exp(s - top)
        total = total * fix + e.sum(dim=1, keepdim=True)
        acc = acc * fix + e @ v[lo : lo + block_size].double()
        best = top
    return (acc / total).numpy()
