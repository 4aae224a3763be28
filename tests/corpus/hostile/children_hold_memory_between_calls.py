# attn-kit: mha-screen
"""Correct, and its first softmax call starts four children that each touch 200 MiB and sleep:
800 MiB held together between calls, every call far shorter than the kit's 0.1 s memory polling.
The call returns once the children hold their memory (each says so on a pipe): on a loaded machine
they could otherwise still be filling it when a fast run ends, and nothing would be held yet."""
import os
import time

import honest_numpy
from honest_numpy import *  # noqa: F403

_started = []


def stable_softmax(scores, allowed=None):
    if not _started:
        _started.append(True)
        held, holding = os.pipe()
        for _ in range(4):
            if os.fork() == 0:
                os.close(held)
                block = bytearray(200 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                os.write(holding, b"1")
                time.sleep(600)
                os._exit(0)
        os.close(holding)
        told = b""
        while len(told) < 4:
            more = os.read(held, 4)
            if not more:  # a child died (its memory was refused): nothing more will come
                break
            told += more
        os.close(held)
    return honest_numpy.stable_softmax(scores, allowed)
