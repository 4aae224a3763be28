"""The socket channel between the kit and its zygote and workers: length-prefixed frames, file
descriptors passed alongside, calls pickled kit -> worker only (replies are wire data, never pickles).
"""

from __future__ import annotations

import io
import pickle
import select
import signal
import socket
import struct
import sys
import time

from attn_kit.base import wire
from attn_kit.base.errors import ChannelTimeout

REPLY_GRACE = 2.0  # seconds a reply may take to arrive once its header has (at most the timeout)


# --- the channels ---------------------------------------------------------------------------------


class Channel:
    """Kit -> worker: length-prefixed pickles (the kit's own data, read by the worker).
    Worker -> kit: base/wire.py frames (data only), read here with deadlines and a size bound."""

    _HEADER = struct.Struct("!Q")

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    # kit side
    def send(self, obj, timeout: float | None = None) -> None:
        data = _dumps(obj)
        if len(data) < 32 << 10:  # fits in the socket's buffer: the send cannot block
            self.sock.sendall(self._HEADER.pack(len(data)) + data)
            return
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(self._HEADER.pack(len(data)) + data)
        except socket.timeout:
            raise ChannelTimeout("did not read what the kit sent") from None
        finally:
            self.sock.settimeout(None)

    def recv_reply(self, deadline: float, grace: float = REPLY_GRACE, text_limit: int = wire.TEXT_FLOOR) -> dict:
        """One reply, decoded; EOFError when the worker is gone, ChannelTimeout when it stalls,
        wire.WireError when the reply is too large (JSON text over `text_limit`) or malformed."""
        total, text = wire.read_header(bytes(self._exactly(wire.HEADER.size, deadline)), text_limit)
        body = self._exactly(total, max(deadline, time.monotonic() + min(REPLY_GRACE, grace)))
        return wire.decode(body, text)

    def _exactly(self, size: int, deadline: float) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0 or not self.poll(left):
                raise ChannelTimeout(f"sent {got:,} of {size:,} bytes and then nothing")
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def poll(self, timeout: float | None = None) -> bool:
        waiter = select.poll()
        waiter.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(waiter.poll(None if timeout is None else max(int(timeout * 1000), 0)))

    # worker side
    def recv_bytes(self) -> bytes:
        (size,) = self._HEADER.unpack(self._blocking(self._HEADER.size))
        return bytes(self._blocking(size))

    def _blocking(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


class _TensorPickler(pickle.Pickler):
    """Pickles plain torch tensors by value through NumPy (harness_torch.by_value); everything
    else, views and tensors sharing storage included, as pickle and torch always do."""

    def __init__(self, file, tensors: dict, by_value):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors = tensors
        self.by_value = by_value

    def reducer_override(self, obj):
        return self.by_value(obj) if id(obj) in self.tensors else NotImplemented


def _dumps(obj) -> bytes:
    """What the kit sends a worker, pickled (the kit's own data: never decoded in the kit)."""
    if "torch" in sys.modules:
        from attn_kit.base import torch_support

        tensors = torch_support.plain_tensors(obj)
        if tensors:
            buffer = io.BytesIO()
            _TensorPickler(buffer, tensors, torch_support.by_value).dump(obj)
            return buffer.getvalue()
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def describe_exit(status: int | None) -> str:
    """A worker's end in words: 'was killed by signal SIGSEGV (segmentation fault)'."""
    if status is None:
        return "stopped unexpectedly"
    if status < 0:
        sig = -status
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        meaning = {
            "SIGSEGV": "segmentation fault",
            "SIGKILL": "killed, often for memory",
            "SIGABRT": "abort",
            "SIGBUS": "bus error",
            "SIGFPE": "arithmetic fault",
        }.get(name, "")
        return f"was killed by {name}" + (f" ({meaning})" if meaning else "")
    return f"exited with status {status} (os._exit or a crash in native code)"
