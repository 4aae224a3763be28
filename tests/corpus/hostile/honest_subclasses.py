# attn-kit: mha-screen
"""Correct; returns builtin and NumPy subclasses defined in this file (tuple, list, float, ndarray)."""
from honest_numpy import *
import honest_numpy


class Pair(tuple):
    pass


class Row(list):
    pass


class Num(float):
    pass


class Arr(np.ndarray):
    pass


def stable_softmax(scores, allowed=None):
    return Row(Num(v) for v in honest_numpy.stable_softmax(scores, allowed))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return Pair((got[0].view(Arr), got[1].view(Arr)))
    return got.view(Arr)
