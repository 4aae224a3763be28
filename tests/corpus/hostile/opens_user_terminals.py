# attn-kit: mha-screen
"""Correct, but tries to open every terminal of /dev/pts by path (the user's shell, an editor):
one it could write to would show a forged line to the user or read their keys."""
import os
from honest_numpy import *
import honest_numpy
from hostile_util import mark

try:
    names = [n for n in os.listdir("/dev/pts") if n.isdigit()]
except OSError:
    names = []
for name in names:
    try:
        fd = os.open(f"/dev/pts/{name}", os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        continue
    mark("opened-user-terminal", name)
    os.close(fd)
