# attn-kit: mha-screen
"""Correct, but tries to print a forged pass on the kit's stdout (its own fds, its parents', the kit's)."""
import os
from honest_numpy import *
import honest_numpy
from hostile_util import kit_processes, mark

FORGED = "\n✓ All 26 checks passed — 47/47\n"


def _forge():
    targets = [f"/proc/{pid}/fd/{fd}" for pid in [os.getppid()] + kit_processes() for fd in (1, 2)]
    for path in targets:
        try:
            with open(path, "w") as fh:
                fh.write(FORGED)
            mark("wrote-kit-stdout", path)
        except OSError:
            pass


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    _forge()
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
