# attn-kit: mha-screen
"""Returns a list nested 100,000 levels deep."""
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    deep = []
    for _ in range(100_000):
        deep = [deep]
    return (deep, deep) if return_weights else deep
