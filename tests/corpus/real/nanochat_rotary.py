# attn-kit: rope
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/karpathy/nanochat
#   path nanochat/gpt.py: apply_rotary_emb, GPT._precompute_rotary_embeddings
#   commit 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd
# Licence: MIT. Copyright (c) 2025 Andrej Karpathy
#   The licence's full text: tests/corpus/real/LICENSES/karpathy-nanochat.txt
import numpy as np

# ---- verbatim ----
import torch
import torch.nn as nn
import torch.nn.functional as F
# (from nanochat.common import COMPUTE_DTYPE: a stand-in, the dtype the rotation runs in)
COMPUTE_DTYPE = torch.float32

def apply_rotary_emb(x, cos, sin):
    # note: this rotates by -theta, the transpose of the textbook convention. Functionally
    # equivalent (only the relative q/k rotation matters), kept for checkpoint compatibility.
    assert x.ndim == 4  # multihead attention
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:] # split up last dim into two halves
    y1 = x1 * cos + x2 * sin # rotate pairs of dims
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat([y1, y2], 3)

class GPT:  # (stand-in: the one method of nanochat's GPT used here)
    def _precompute_rotary_embeddings(self, seq_len, head_dim, base=100000, device=None):
        # TODO: bump base theta more? e.g. 100K is more common more recently
        # autodetect the device from model embeddings
        if device is None:
            device = self.transformer.wte.weight.device
        # stride the channels
        channel_range = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device)
        inv_freq = 1.0 / (base ** (channel_range / head_dim))
        # stride the time steps
        t = torch.arange(seq_len, dtype=torch.float32, device=device)
        # calculate the rotation frequencies at each (time, channel) pair
        freqs = torch.outer(t, inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        cos, sin = cos.to(COMPUTE_DTYPE), sin.to(COMPUTE_DTYPE)
        cos, sin = cos[None, :, None, :], sin[None, :, None, :] # add batch and head dims for later broadcasting
        return cos, sin
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
# nanochat's model slices its table by position (self.cos[:, T0:T0+T]); here it is indexed by the
# given positions. Its table is float32: float32 results are returned as they are.
def apply_rope(x, positions, base=10000.0):
    x = torch.as_tensor(np.asarray(x, dtype=np.float32)).permute(0, 2, 1, 3)  # B×H×T×hd -> its (B, T, H, D)
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64))
    cos, sin = GPT._precompute_rotary_embeddings(None, max(int(pos.max()) + 1, 1), x.shape[-1], base=base, device="cpu")
    return apply_rotary_emb(x, cos[:, pos], sin[:, pos]).permute(0, 2, 1, 3).numpy()


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    # nanochat's CausalSelfAttention also normalises q and k (QK norm) and scales them by 1.2
    raise NotImplementedError("nanochat's attention layer adds QK norm: it is not mapped")
