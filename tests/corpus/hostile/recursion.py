# attn-kit: mha-screen
"""Recurses without end in multi_head_attention."""
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    return multi_head_attention(x, params, num_heads, mask, return_weights)
