# attn-kit: mha-screen
"""Correct, but tries to open the controlling terminal and read the kit's stdin."""
import os
from honest_numpy import *
import honest_numpy
from hostile_util import mark

try:
    fd = os.open("/dev/tty", os.O_RDWR)
    mark("has-tty")
    os.close(fd)
except OSError:
    pass
if os.read(0, 10):
    mark("read-stdin")
