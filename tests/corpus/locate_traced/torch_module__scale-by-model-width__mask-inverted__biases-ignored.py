# attn-kit: mha-screen
# traced-locate corpus: bases/torch_module.py with scale-by-model-width, mask-inverted, biases-ignored
"""Traced-locate corpus base: a torch nn.Module whose forward does the work."""
import torch
from torch import nn


def stable_softmax(scores, allowed=None):
    s = torch.as_tensor(scores, dtype=torch.float64)
    ok = torch.ones(s.shape, dtype=torch.bool) if allowed is None else torch.as_tensor(allowed, dtype=torch.bool)
    filled = s.masked_fill(ok, float("-inf"))
    top = filled.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(filled - top)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def causal_mask(B, T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool)).expand(B, T, T).clone().numpy()


def padding_mask(lengths, T):
    n = torch.as_tensor(lengths).view(-1, 1, 1)
    return (torch.arange(T).view(1, 1, T) < n).expand(len(lengths), T, T).clone().numpy()


class Attention(nn.Module):
    def __init__(self, params, num_heads):
        super().__init__()
        self.h = num_heads
        self.w = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in params.items() if v is not None}

    def project(self, x, name):
        y = x @ self.w["W" + name]
        bias = self.w.get("b" + name)
        return y

    def forward(self, x, mask=None):
        B, T, D = x.shape
        hd = D // self.h
        q = self.project(x, "q").view(B, T, self.h, hd).transpose(1, 2)
        k = self.project(x, "k").view(B, T, self.h, hd).transpose(1, 2)
        v = self.project(x, "v").view(B, T, self.h, hd).transpose(1, 2)
        att = q @ k.transpose(-2, -1)
        att = att / D**0.5
        allowed = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)[:, None]
        w = stable_softmax(att, allowed)
        ctx = (w @ v).transpose(1, 2).reshape(B, T, D)
        return self.project(ctx, "o"), w


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(x, dtype=torch.float64)
    if num_heads < 1 or x.shape[-1] % num_heads:
        raise ValueError("num_heads must divide D")
    with torch.no_grad():
        out, w = Attention(params, num_heads)(x, mask)
    return (out, w) if return_weights else out
