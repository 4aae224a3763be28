# attn-kit: mha-screen
"""Kills its own process with SIGKILL, using almost no memory: the kit must not blame the memory
cap (it did not stop it, and the kernel reported no out-of-memory kill)."""
import os
import signal

from honest_numpy import *  # noqa: F403


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    os.kill(os.getpid(), signal.SIGKILL)
