# attn-kit: mha-screen
"""Raises KeyboardInterrupt and GeneratorExit from the functions."""
from honest_numpy import *


def stable_softmax(scores, allowed=None):
    raise KeyboardInterrupt


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    raise GeneratorExit
