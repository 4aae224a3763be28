# attn-kit: gqa
"""Key padding only (a mask whose rows differ raises), blocked scores filled with -1e9 (a query
with no allowed key is uniform), no 1/sqrt(hd), b_v never added: an nn.Module that repeats the
key/value heads with repeat_interleave."""

import torch
from torch import nn


class GroupedAttention(nn.Module):
    def __init__(self, params, heads, kv_heads):
        super().__init__()
        self.p = {k: None if v is None else torch.as_tensor(v, dtype=torch.float64) for k, v in params.items()}
        self.h, self.kv = heads, kv_heads

    def lin(self, x, w, b):
        y = x @ self.p[w]
        return y if b is None or self.p.get(b) is None else y + self.p[b]

    def forward(self, x, key_padding):
        B, T, D = x.shape
        hd = D // self.h
        q = self.lin(x, "Wq", "bq").view(B, T, self.h, hd).transpose(1, 2)
        k = self.lin(x, "Wk", "bk").view(B, T, self.kv, hd).transpose(1, 2)
        v = self.lin(x, "Wv", None).view(B, T, self.kv, hd).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        s = q @ k.transpose(-1, -2)
        if key_padding is not None:
            s = s.masked_fill(~key_padding[:, None, None, :], -1e9)
        a = torch.softmax(s, dim=-1)
        return self.lin((a @ v).transpose(1, 2).reshape(B, T, D), "Wo", "bo"), a


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    x = torch.as_tensor(x, dtype=torch.float64)
    D = x.shape[-1]
    if num_heads < 1 or D % num_heads or num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError("bad head counts")
    pad = None
    if mask is not None:
        m = torch.as_tensor(mask, dtype=torch.bool)
        if not bool((m == m[:, :1]).all()):
            raise NotImplementedError("key padding only: every query of a sequence must allow the same keys")
        pad = m[:, 0]
    out, a = GroupedAttention(params, num_heads, num_kv_heads)(x, pad)
    return (out.numpy(), a.numpy()) if return_weights else out.numpy()
