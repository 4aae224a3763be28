# attn-kit: mha-screen
"""Returns a NumPy array of strings (a dtype the kit does not read)."""
from honest_numpy import *
import honest_numpy


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return got[0].astype(str), got[1].astype(str)
    return got.astype(str)
