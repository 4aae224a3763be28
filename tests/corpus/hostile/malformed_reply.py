# attn-kit: mha-screen
"""Sends a well-framed reply that is not valid data, then exits."""
import os
import socket
import struct
from honest_numpy import *


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    body = b"\x80\x04\x95not json at all"
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        if s.type == socket.SOCK_STREAM:
            s.sendall(struct.pack("!QI", len(body), len(body)) + body)
    os._exit(0)
