# attn-kit: mha-screen
"""Correct, but its first call starts a fork bomb: the worker forks until the kernel refuses, and
every child forks once more before it sleeps (ten minutes). Without a process limit it would
stop only at its own safety cap (SAFETY processes; the test fails long before the machine
does). It marks `refused` when a fork failed, and `bounded` or `unbounded` from the number of
this case's processes alive at the end (the kit's own included), against the kit's allowance."""
import os
import time

import honest_numpy
from honest_numpy import *  # noqa: F403
from hostile_util import kit_processes, mark

SAFETY = 600
_done = []


def _child() -> None:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        pass
    time.sleep(600)
    os._exit(0)


def _bomb() -> None:
    refused = 0
    for _ in range(SAFETY // 2):
        try:
            pid = os.fork()
        except OSError:            # EAGAIN: RLIMIT_NPROC
            refused += 1
            if refused >= 3:
                break
            time.sleep(0.05)
            continue
        if pid == 0:
            _child()
    time.sleep(0.5)                # the children's own forks
    alive = len(kit_processes()) + 1
    if refused:
        mark("refused", str(refused))
    from attn_kit.sandbox.limits import PROCESS_ALLOWANCE
    mark("bounded" if alive <= PROCESS_ALLOWANCE + 16 else "unbounded", str(alive))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    if not _done:
        _done.append(1)
        _bomb()
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
