# attn-kit: mha-screen
"""Correct; prints bytes that are not UTF-8 and terminal escape codes."""
import os
from honest_numpy import *
import honest_numpy


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    os.write(1, b"\xff\xfe\x1b[2J\x1b]0;title\x07 binary noise\n")
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
