# attn-kit: mha-screen
# locate corpus: bases/torch_batched.py with scale-by-model-width, max-over-blocked
"""Locate corpus base: torch, all heads at once."""
import torch


def stable_softmax(scores, allowed=None):
    s = torch.as_tensor(scores, dtype=torch.float64)
    ok = torch.ones(s.shape, dtype=torch.bool) if allowed is None else torch.as_tensor(allowed, dtype=torch.bool)
    filled = s.masked_fill(~ok, float("-inf"))
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(filled - top)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def causal_mask(B, T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool)).expand(B, T, T).clone().numpy()


def padding_mask(lengths, T):
    n = torch.as_tensor(lengths).view(-1, 1, 1)
    return (torch.arange(T).view(1, 1, T) < n).expand(len(lengths), T, T).clone().numpy()


def _linear(x, params, w, b):
    y = x @ torch.as_tensor(params[w], dtype=torch.float64)
    if params.get(b) is not None:
        y = y + torch.as_tensor(params[b], dtype=torch.float64)
    return y


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(x, dtype=torch.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError("num_heads must divide D")
    H = num_heads
    hd = D // H
    q = _linear(x, params, "Wq", "bq").view(B, T, H, hd).transpose(1, 2)
    k = _linear(x, params, "Wk", "bk").view(B, T, H, hd).transpose(1, 2)
    v = _linear(x, params, "Wv", "bv").view(B, T, H, hd).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / D ** 0.5
    allowed = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)[:, None, :, :]
    w = stable_softmax(scores, allowed)
    heads = w @ v
    concat = heads.transpose(1, 2).reshape(B, T, D)
    out = _linear(concat, params, "Wo", "bo")
    if return_weights:
        return out, w
    return out
