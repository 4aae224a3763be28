# attn-kit: mha-screen
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/huggingface/pytorch-image-models
#   path timm/layers/attention.py: maybe_add_mask, resolve_self_attn_mask, Attention
#   commit 02bb6b3e3e423554c211eaa0c6b419461336f94e
# Licence: Apache-2.0. Copyright Ross Wightman (timm contributors).
#   The licence's full text: tests/corpus/real/LICENSES/huggingface-pytorch-image-models.txt
import numpy as np

# ---- verbatim ----
from typing import Final, Optional, Type

import torch
from torch import nn as nn
from torch.nn import functional as F

# (from ._fx import register_notrace_function: a stand-in, it only registers the function for FX tracing)
def register_notrace_function(fn):
    return fn
# (from .config import use_fused_attn: a stand-in for timm's setting TIMM_FUSED_ATTN=0, which
# selects the layer's own, non-fused attention; the fused one calls scaled_dot_product_attention)
def use_fused_attn():
    return False
# (from .pos_embed_sincos import apply_rot_embed_cat: used only by AttentionRope, left out)


__all__ = ['Attention', 'AttentionRope', 'maybe_add_mask', 'resolve_self_attn_mask']


@torch.fx.wrap
@register_notrace_function
def maybe_add_mask(scores: torch.Tensor, attn_mask: Optional[torch.Tensor] = None):
    return scores if attn_mask is None else scores + attn_mask


def resolve_self_attn_mask(
        seq_len: int,
        attn: torch.Tensor,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
) -> Optional[torch.Tensor]:
    # Build additive bias matching SDPA semantics for self-attention
    # is_causal and attn_mask are mutually exclusive (is_causal takes precedence)
    if is_causal:
        attn_bias = attn.new_full((seq_len, seq_len), float('-inf')).triu_(1)
    elif attn_mask is None:
        attn_bias = None
    elif attn_mask.dtype == torch.bool:
        attn_bias = torch.zeros_like(attn_mask, dtype=attn.dtype)
        attn_bias.masked_fill_(~attn_mask, float('-inf'))
    else:
        attn_bias = attn_mask
    return attn_bias


class Attention(nn.Module):
    """Standard Multi-head Self Attention module with QKV projection.

    This module implements the standard multi-head attention mechanism used in transformers.
    It supports both the fused attention implementation (scaled_dot_product_attention) for
    efficiency when available, and a manual implementation otherwise. The module includes
    options for QK normalization, attention dropout, and projection dropout.
    """
    fused_attn: Final[bool]

    def __init__(
            self,
            dim: int,
            num_heads: int = 8,
            attn_head_dim: Optional[int] = None,
            dim_out: Optional[int] = None,
            qkv_bias: bool = False,
            qk_norm: bool = False,
            scale_norm: bool = False,
            proj_bias: bool = True,
            attn_drop: float = 0.,
            proj_drop: float = 0.,
            norm_layer: Optional[Type[nn.Module]] = None,
            device=None,
            dtype=None,
    ) -> None:
        """Initialize the Attention module.

        Args:
            dim: Input dimension of the token embeddings.
            num_heads: Number of attention heads.
            attn_head_dim: Dimension of each attention head. If None, computed as dim // num_heads.
            dim_out: Output dimension. If None, same as dim.
            qkv_bias: Whether to use bias in the query, key, value projections.
            qk_norm: Whether to apply normalization to query and key vectors.
            scale_norm: Whether to apply normalization to attention output before projection.
            proj_bias: Whether to use bias in the output projection.
            attn_drop: Dropout rate applied to the attention weights.
            proj_drop: Dropout rate applied after the output projection.
            norm_layer: Normalization layer constructor for QK normalization if enabled.
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        dim_out = dim_out or dim
        head_dim = attn_head_dim
        if head_dim is None:
            assert dim % num_heads == 0, 'dim should be divisible by num_heads'
            head_dim = dim // num_heads
        if qk_norm or scale_norm:
            assert norm_layer is not None, 'norm_layer must be provided if qk_norm or scale_norm is True'

        self.num_heads = num_heads
        self.head_dim = head_dim
        self.attn_dim = num_heads * head_dim
        self.scale = head_dim ** -0.5
        self.fused_attn = use_fused_attn()

        self.qkv = nn.Linear(dim, self.attn_dim * 3, bias=qkv_bias, **dd)
        self.q_norm = norm_layer(head_dim, **dd) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(head_dim, **dd) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.norm = norm_layer(self.attn_dim, **dd) if scale_norm else nn.Identity()
        self.proj = nn.Linear(self.attn_dim, dim_out, bias=proj_bias, **dd)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(
            self,
            x: torch.Tensor,
            attn_mask: Optional[torch.Tensor] = None,
            is_causal: bool = False,
    ) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)

        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask=attn_mask,
                dropout_p=self.attn_drop.p if self.training else 0.,
                is_causal=is_causal,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn_bias = resolve_self_attn_mask(N, attn, attn_mask, is_causal)
            attn = maybe_add_mask(attn, attn_bias)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v

        x = x.transpose(1, 2).reshape(B, N, self.attn_dim)
        x = self.norm(x)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x
# ---- end verbatim ----


# ---- adapter (attn-kit) ----
# The original has no softmax, causal_mask or padding_mask of this interface; these three are
# written by attn-kit, plainly and correctly, so that the checks judge the original layer.
def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64)
    keep = np.ones(s.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if not keep.any():
        return [0.0] * len(s)
    e = np.where(keep, np.exp(np.where(keep, s, 0.0) - s[keep].max()), 0.0)
    return list(e / e.sum())


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]
def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = torch.as_tensor(np.asarray(x, dtype=np.float64))
    B, T, D = x.shape
    layer = Attention(D, num_heads, qkv_bias=True, dtype=torch.float64).eval()  # its qkv_bias option
    f64 = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    zero = torch.zeros(D, dtype=torch.float64)
    with torch.no_grad():  # qkv holds [Wq | Wk | Wv] as nn.Linear's weight[out][in]; no bias = 0
        layer.qkv.weight.copy_(torch.cat([f64(params[w]) for w in ("Wq", "Wk", "Wv")], dim=1).T)
        layer.qkv.bias.copy_(torch.cat([f64(params[b]) if params.get(b) is not None else zero for b in ("bq", "bk", "bv")]))
        layer.proj.weight.copy_(f64(params["Wo"]).T)
        layer.proj.bias.copy_(f64(params["bo"]) if params.get("bo") is not None else zero)
    seen = []  # the attention weights, read where the layer hands them to its dropout
    layer.attn_drop.register_forward_hook(lambda module, args, out: seen.append(out))
    attn_mask = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))[:, None]  # True = allowed, SDPA's way
    with torch.no_grad():
        out = layer(x, attn_mask=attn_mask).numpy()
    return (out, seen[0].numpy()) if return_weights else out
