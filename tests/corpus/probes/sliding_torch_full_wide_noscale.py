# attn-kit: sliding-window
"""The whole T×T score matrix built and masked (torch), a band of window + 1 keys (j >= i - window),
and no 1/sqrt(d)."""
import torch


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    q, k, v = (torch.as_tensor(a, dtype=torch.float64) for a in (q, k, v))
    T = q.shape[-2]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    band = (j <= i) & (j >= i - window)
    scores = (q @ k.transpose(-1, -2)).masked_fill(~band, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).numpy()
