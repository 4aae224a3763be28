# attn-kit: mha-screen
"""Maps 1.5 GiB of shared anonymous memory and touches it (run under --memory 256M)."""
import mmap
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    m = mmap.mmap(-1, 1536 << 20, flags=mmap.MAP_SHARED)
    for i in range(0, len(m), 4096):
        m[i] = 1
    return None
