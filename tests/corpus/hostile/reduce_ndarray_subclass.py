# attn-kit: mha-screen
"""Correct values returned as an ndarray subclass whose __reduce__ would run code where it is unpickled."""
from honest_numpy import *
import honest_numpy
from hostile_util import mark


class Loaded(np.ndarray):
    def __reduce__(self):
        return (mark, ("reduce-ran",))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return got[0].view(Loaded), got[1].view(Loaded)
    return got.view(Loaded)
