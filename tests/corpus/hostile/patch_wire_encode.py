# attn-kit: mha-screen
"""Replaces the worker's reply encoder with one that sends a pickle: every reply is unreadable."""
import pickle
import attn_kit.wire
from honest_numpy import *

_real = attn_kit.wire.encode


def _pickled(message):
    data = pickle.dumps(message)
    return attn_kit.wire.HEADER.pack(len(data), len(data)) + data


attn_kit.wire.encode = _pickled
