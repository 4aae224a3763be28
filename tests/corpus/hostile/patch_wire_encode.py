# attn-kit: mha-screen
"""Replaces the worker's reply encoder with one that sends a pickle: every reply is unreadable."""
import pickle
import attn_kit.base.wire
from honest_numpy import *

_real = attn_kit.base.wire.encode


def _pickled(message):
    data = pickle.dumps(message)
    return attn_kit.base.wire.HEADER.pack(len(data), len(data)) + data


attn_kit.base.wire.encode = _pickled
