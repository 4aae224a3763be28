# attn-kit: rope
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/EleutherAI/gpt-neox
#   path megatron/model/positional_embeddings.py: RotaryEmbedding, rotate_half, apply_rotary_pos_emb
#   commit 007003aae8d00e9526fa7babf564ea4751d64018
# Licence: Apache-2.0. Copyright EleutherAI (GPT-NeoX contributors).
#   The licence's full text: tests/corpus/real/LICENSES/EleutherAI-gpt-neox.txt
import numpy as np

# ---- verbatim ----
import torch
# (from megatron.module import MegatronModule: a stand-in, MegatronModule is a torch.nn.Module)
MegatronModule = torch.nn.Module


class SinusoidalPositionalEmbedding(MegatronModule):

    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1. / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer('inv_freq', inv_freq)

    def forward(self, x, seq_dim=1):
        t = torch.arange(x.shape[seq_dim], device=x.device).type_as(self.inv_freq)
        sinusoid_inp = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((sinusoid_inp.sin(), sinusoid_inp.cos()), dim=-1)
        return emb[None, :, :]


class RotaryEmbedding(MegatronModule):
    
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1. / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer('inv_freq', inv_freq)
        self.seq_len_cached = None
        self.cos_cached = None
        self.sin_cached = None

    def forward(self, x, seq_dim=1):
        seq_len = x.shape[seq_dim]
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(x.shape[seq_dim], device=x.device).type_as(self.inv_freq)
            freqs = torch.einsum('i,j->ij', t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
            self.cos_cached = emb.cos()[:, None, None, :]
            self.sin_cached = emb.sin()[:, None, None, :]
        return self.cos_cached, self.sin_cached


# rotary pos emb helpers:

@torch.jit.script
def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=x1.ndim - 1) # dim=-1 triggers a bug in earlier torch versions

@torch.jit.script
def apply_rotary_pos_emb(q, k, cos, sin):
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
# Its frequency table is float32 (.float()): the rotation runs in float32 here, and its float32
# results are returned as they are.
def apply_rope(x, positions, base=10000.0):
    x = torch.as_tensor(np.asarray(x, dtype=np.float32)).permute(2, 0, 1, 3)  # B×H×T×hd -> Megatron's [T, B, H, hd]
    cos, sin = RotaryEmbedding(x.shape[-1], base)(x, seq_dim=0)  # the table takes no positions: `positions` has nowhere to go
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return rotated.permute(1, 2, 0, 3).numpy()


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    raise NotImplementedError("this file has rotary embeddings only, no attention layer")
