# attn-kit: rope
"""Correct, in a style unlike the references: torch, float32, a cached cos/sin table indexed by
position, rotate_half, an nn.Module layer with fused qkv weights."""

import torch
from torch import nn


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class RotaryTable:
    def __init__(self, hd, base=10000.0):
        self.inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))

    def __call__(self, positions):
        f = torch.as_tensor(positions, dtype=torch.float32)[:, None] * self.inv[None]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos(), emb.sin()


def apply_rope(x, positions, base=10000.0):
    x = torch.as_tensor(x, dtype=torch.float32)
    if x.shape[-1] % 2:
        raise ValueError("the head width must be even")
    cos, sin = RotaryTable(x.shape[-1], base)(positions)
    return (x * cos + rotate_half(x) * sin).numpy()


class Layer(nn.Module):
    def __init__(self, params, heads):
        super().__init__()
        self.p = {k: None if v is None else torch.as_tensor(v, dtype=torch.float32) for k, v in params.items()}
        self.h = heads

    def forward(self, x, positions, mask):
        B, T, D = x.shape
        hd = D // self.h
        w = torch.cat([self.p["Wq"], self.p["Wk"], self.p["Wv"]], dim=1)
        b = torch.cat([self.p.get(n) if self.p.get(n) is not None else torch.zeros(D) for n in ("bq", "bk", "bv")])
        q, k, v = (x @ w + b).view(B, T, 3, self.h, hd).permute(2, 0, 3, 1, 4)
        cos, sin = RotaryTable(hd)(positions)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        s = q @ k.transpose(-1, -2) * hd**-0.5
        if mask is not None:
            s = s.masked_fill(~mask[:, None], float("-inf"))
        a = torch.softmax(s, dim=-1).nan_to_num(0.0)
        y = (a @ v).transpose(1, 2).reshape(B, T, D) @ self.p["Wo"]
        if self.p.get("bo") is not None:
            y = y + self.p["bo"]
        return y, a


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = torch.as_tensor(x, dtype=torch.float32)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads or (D // num_heads) % 2:
        raise ValueError("num_heads must divide D into even head widths")
    m = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    y, a = Layer(params, num_heads)(x, list(range(T)) if positions is None else positions, m)
    return (y.numpy(), a.numpy()) if return_weights else y.numpy()
