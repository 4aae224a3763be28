# attn-kit: mha-screen
"""Returns an object whose __repr__, __eq__ and __len__ raise."""
from honest_numpy import *


class Nasty:
    def __repr__(self):
        raise RuntimeError("repr")

    def __eq__(self, other):
        raise RuntimeError("eq")

    def __len__(self):
        raise RuntimeError("len")


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    return (Nasty(), Nasty()) if return_weights else Nasty()
