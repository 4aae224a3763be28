# attn-kit: mha-screen
"""Correct; returns (out, weights) as a namedtuple."""
from collections import namedtuple
from honest_numpy import *
import honest_numpy

Result = namedtuple("Result", "out weights")


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    return Result(*got) if return_weights else got
