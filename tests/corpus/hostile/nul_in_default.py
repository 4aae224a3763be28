# attn-kit: mha-screen
"""Writes into its params (so the kit names the written argument from the signature) and has a
default whose repr holds a NUL: the signature text then cannot be parsed as Python source."""
import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403


class _Default:
    def __repr__(self):
        return "a\0b"


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False, extra=_Default()):
    out = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    params["Wq"] = np.array(params["Wq"], dtype=float) + 1.0      # a write into the caller's dict
    return out
