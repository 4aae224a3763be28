# attn-kit: mha-screen
"""Forks four children that each hold 120 MB (run under --memory 256M)."""
import os
import time
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            block = bytearray(120 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(600)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    return None
