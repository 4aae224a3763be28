# attn-kit: mha-screen
"""Closes every socket it holds, then sleeps in multi_head_attention."""
import os
import socket
import time
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            s = socket.socket(fileno=os.dup(fd))
            s.close()
            os.close(fd)
        except OSError:
            pass
    time.sleep(600)
