# attn-kit: mha-screen
"""Correct, but tries to read the kit's memory, environment and descriptors through /proc."""
import os
from honest_numpy import *
import honest_numpy
from hostile_util import kit_processes, mark


def _try_read():
    for pid in kit_processes():
        for what in ("mem", "environ", "fd/0", "maps"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as fh:
                    if what == "mem":
                        fh.seek(0x400000)
                    fh.read(64)
                mark("leak", f"{pid}/{what}")
            except OSError:
                pass


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    _try_read()
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
