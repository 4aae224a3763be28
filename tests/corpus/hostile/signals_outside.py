# attn-kit: mha-screen
"""Correct, but signals (signal 0: only the permission check) its parent and process 1, which are
the kit's (nsinit), and the process group. Confined, every one is refused."""
import os

from honest_numpy import *  # noqa: F403
from hostile_util import mark

for pid in {os.getppid(), 1}:
    try:
        os.kill(pid, 0)
        mark("signalled", str(pid))
    except PermissionError:
        mark("signal-refused", str(pid))
    except ProcessLookupError:
        pass
