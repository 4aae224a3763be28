# attn-kit: mha-screen
"""Correct; returns arrays of dtype object holding floats."""
from honest_numpy import *
import honest_numpy


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return got[0].astype(object), got[1].astype(object)
    return got.astype(object)
