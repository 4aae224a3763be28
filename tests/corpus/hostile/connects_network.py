# attn-kit: mha-screen
"""Correct, but opens TCP connections at load (to a local port and to an outside address). Confined,
each is refused by the kernel (PermissionError) before any packet leaves."""
import socket

from honest_numpy import *  # noqa: F403
from hostile_util import mark

for address in (("127.0.0.1", 9), ("192.0.2.1", 80)):
    try:
        socket.create_connection(address, timeout=2).close()
        mark("tcp-reached", repr(address))
    except PermissionError:
        mark("tcp-refused", repr(address))
    except OSError as exc:  # refused by the other end, unreachable, timed out: the stack was reached
        mark("tcp-reached", f"{address!r} {exc!r}")
