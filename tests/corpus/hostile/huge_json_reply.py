# attn-kit: mha-screen
"""Sends, from every call, a well-formed reply of about 30 MiB of JSON text (under the kit's
absolute limit): four million one-number lists, which cost the kit ~20 times their size in Python
objects and many seconds to decode. It is encoded once at load time and written straight onto the
channel, so the call itself returns at once. The kit reads at most what the call's arguments
justify and reports the rest as a crashed call, within the call's time."""
import json
import os
import socket
import struct

from honest_numpy import *  # noqa: F403

_VALUE = b"[" + b"[0.125]," * 3_999_999 + b"[0.125]]"        # built as bytes: fast enough at load
_TEXT = json.dumps({"kind": "outcome", "status": "ok", "value": "@", "error": None, "output": "",
                    "detail": "", "seconds": 0.0, "extra": {}, "after": None}).encode().replace(b'"@"', _VALUE)
_REPLY = struct.pack("!QI", len(_TEXT), len(_TEXT)) + _TEXT


def _send():
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        if s.type == socket.SOCK_STREAM:
            s.sendall(_REPLY)
            os._exit(0)
        s.close()


def stable_softmax(scores, allowed=None):
    _send()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    _send()
