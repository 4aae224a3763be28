# attn-kit: mha-screen
"""Correct, but records every descriptor it holds that is not its own capture, /dev/null or the channel."""
import os
from honest_numpy import *
import honest_numpy
from hostile_util import mark

for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith("pipe:") or target.startswith("/dev/pts") or target.startswith("/dev/tty"):
        mark("kit-descriptor", f"{fd} -> {target}")
