# attn-kit: mha-screen
"""Correct, and its first softmax call starts four children that each touch 200 MiB and sleep:
800 MiB held together between calls, every call far shorter than the kit's 0.1 s memory polling."""
import os
import time

import honest_numpy
from honest_numpy import *  # noqa: F403

_started = []


def stable_softmax(scores, allowed=None):
    if not _started:
        _started.append(True)
        for _ in range(4):
            if os.fork() == 0:
                block = bytearray(200 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(600)
                os._exit(0)
    return honest_numpy.stable_softmax(scores, allowed)
