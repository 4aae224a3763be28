# attn-kit: mha-screen
"""Leaves each call's arguments as it got them, and also the previous call's, but keeps a
reference to every call's and writes into those of the call two calls back (during a later
call, when neither that call's own comparison nor the next one's looks at them): the scores
of stable_softmax, the params dict of multi_head_attention."""
import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403

_kept = []


def _spoil():
    if len(_kept) < 2:
        return
    for a in _kept.pop(0):
        if isinstance(a, list) and a and isinstance(a[0], float):
            a[0] += 1.0
        elif isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size:
            a.flat[0] += 1.0
        elif isinstance(a, dict) and "Wq" in a:
            a["Wq"] = np.zeros_like(np.asarray(a["Wq"], dtype=float))


def stable_softmax(scores, allowed=None):
    _spoil()
    _kept.append((scores, allowed))
    return honest_numpy.stable_softmax(np.array(scores, dtype=float), allowed)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    _spoil()
    out = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    _kept.append((x, params))
    return out
