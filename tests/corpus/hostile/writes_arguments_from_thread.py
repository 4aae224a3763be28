# attn-kit: mha-screen
"""Leaves every argument as it got it while its calls run, but a thread of its own writes into
the arguments it kept a moment after the call returned, between the kit's calls, and only
into those of the last multi_head_attention call (whichever call comes next, nothing of its
own is written)."""
import threading
import time

import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403


def _later(params):
    time.sleep(0.05)
    params["Wo"] = np.zeros_like(np.asarray(params["Wo"], dtype=float))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    out = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    threading.Thread(target=_later, args=(params,), daemon=True).start()
    return out
