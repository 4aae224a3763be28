# attn-kit: rope
"""Adjacent pairs (the interleaved convention), float32 throughout, scores divided by hd instead
of sqrt(hd), b_o dropped: torch, complex numbers as the rotation."""

import torch


def _rotate(x, positions, base):
    hd = x.shape[-1]
    if hd % 2:
        raise ValueError("the head width must be even")
    freqs = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    angles = torch.outer(torch.as_tensor(positions, dtype=torch.float32), freqs)
    turn = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], hd // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2)


def apply_rope(x, positions, base=10000.0):
    return _rotate(torch.as_tensor(x, dtype=torch.float32), positions, base).numpy()


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = torch.as_tensor(x, dtype=torch.float32)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads or (D // num_heads) % 2:
        raise ValueError("bad head count")
    hd = D // num_heads
    p = {k: None if v is None else torch.as_tensor(v, dtype=torch.float32) for k, v in params.items()}
    pos = list(range(T)) if positions is None else positions

    def lin(w, b):
        y = x @ p[w]
        return y if p.get(b) is None else y + p[b]

    q, k, v = (lin(w, b).view(B, T, num_heads, hd).transpose(1, 2) for w, b in (("Wq", "bq"), ("Wk", "bk"), ("Wv", "bv")))
    q, k = _rotate(q, pos, 10000.0), _rotate(k, pos, 10000.0)
    s = q @ k.transpose(-1, -2) / hd
    if mask is not None:
        ok = torch.as_tensor(mask, dtype=torch.bool)[:, None]
        s = s.masked_fill(~ok, float("-inf"))
    w = torch.softmax(s, dim=-1).nan_to_num(0.0)
    out = (w @ v).transpose(1, 2).reshape(B, T, D) @ p["Wo"]
    return (out.numpy(), w.numpy()) if return_weights else out.numpy()
