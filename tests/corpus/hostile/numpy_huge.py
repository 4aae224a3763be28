# attn-kit: mha-screen
"""Allocates a 20 GB array (run under --memory 256M)."""
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    big = np.ones((50_000, 50_000))
    return big
