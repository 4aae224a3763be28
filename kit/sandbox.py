"""Starts, feeds and stops the candidate's worker process.

On platforms with fork, a "zygote" is forked once, before the kit computes any expected value;
every worker is forked from the zygote, so it starts instantly with NumPy already imported and
never holds a hidden expected value in its memory. Where fork is missing (Windows), workers are
started with multiprocessing's spawn. A hang costs one call: the worker is killed and a fresh
one is loaded for the next call. Ctrl-C and the kit's exit leave no child behind.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

from . import worker
from .errors import LoadError
from .values import ErrorInfo, Outcome

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY = 2 << 30


def _die_with_parent():
    """Linux: ask the kernel to kill this process when its parent dies (kill -9 of the kit)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Channel:
    """Length-prefixed pickles over a connected socket: the part of multiprocessing's Connection
    the worker protocol uses (send, recv, recv_bytes, poll, close), without importing
    multiprocessing's authentication machinery on every start. Plain pickle also means torch
    tensors travel by value, never through shared memory."""

    _HEADER = struct.Struct("!Q")

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(self._HEADER.pack(len(data)))
        self.sock.sendall(data)

    def recv_bytes(self) -> bytes:
        (size,) = self._HEADER.unpack(self._exactly(self._HEADER.size))
        return bytes(self._exactly(size))

    def recv(self):
        return pickle.loads(self.recv_bytes())

    def _exactly(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def poll(self, timeout: float | None = None) -> bool:
        waiter = select.poll()
        waiter.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(waiter.poll(None if timeout is None else int(timeout * 1000)))

    def close(self) -> None:
        self.sock.close()


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
        meaning = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed, often for memory",
                   "SIGABRT": "abort", "SIGBUS": "bus error", "SIGFPE": "arithmetic fault"}.get(name, "")
        return f"was killed by {name}" + (f" ({meaning})" if meaning else "")
    return f"exited with status {status} (os._exit or a crash in native code)"


class _Zygote:
    """A clean process that forks workers on request and reports how they ended."""

    def __init__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:   # pragma: no cover - runs in the child
            ours.close()
            try:
                self._loop(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.pid, self.sock = pid, ours

    @staticmethod
    def _loop(sock):   # pragma: no cover - runs in the child
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _die_with_parent()
        while True:
            try:
                request = sock.recv(64)
            except OSError:
                return
            if not request:
                return
            if request == b"spawn":
                a, b = socket.socketpair()
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    a.close()
                    _die_with_parent()
                    try:
                        worker.serve(Channel(b))
                    finally:
                        os._exit(0)
                b.close()
                socket.send_fds(sock, [pid.to_bytes(8, "little")], [a.fileno()])
                a.close()
            elif request.startswith(b"wait"):
                pid = int(request[4:])
                try:
                    _, status = os.waitpid(pid, 0)
                    code = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    code = 0
                sock.sendall(code.to_bytes(8, "little", signed=True))

    def spawn(self):
        self.sock.sendall(b"spawn")
        data, fds, _, _ = socket.recv_fds(self.sock, 8, 1)
        if not fds:
            raise OSError("the zygote process is gone")
        return int.from_bytes(data, "little"), Channel(socket.socket(fileno=fds[0]))

    def reap(self, pid: int) -> int:
        self.sock.sendall(b"wait%d" % pid)
        return int.from_bytes(self.sock.recv(8), "little", signed=True)

    def close(self):
        try:
            self.sock.close()
        finally:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


class _ForkLauncher:
    def __init__(self):
        self.zygote = _Zygote()

    def start(self):
        return self.zygote.spawn()

    def kill(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def status(self, pid) -> int:
        return self.zygote.reap(pid)

    def close(self):
        self.zygote.close()


class _SpawnLauncher:   # pragma: no cover - used where fork is missing
    def __init__(self):
        import multiprocessing  # only here: the fork path does not need it
        self.context = multiprocessing.get_context("spawn")
        self.processes = {}

    def start(self):
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=worker.serve, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        self.processes[process.pid] = process
        return process.pid, ours

    def kill(self, pid):
        self.processes[pid].kill()

    def status(self, pid) -> int:
        process = self.processes.pop(pid)
        process.join(5)
        return process.exitcode

    def close(self):
        for process in self.processes.values():
            process.kill()


def make_launcher():
    if hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32":
        return _ForkLauncher()
    return _SpawnLauncher()


@dataclass
class LoadInfo:
    functions: dict[str, str]     # name -> signature text, as the candidate's file defines them
    output: str
    note: str                     # e.g. "memory cap not applied: ..."


class Sandbox:
    """One candidate file, loaded in a worker; `call` runs one of its functions."""

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT, memory: int | None = DEFAULT_MEMORY,
                 launcher=None):
        self.path = str(path)
        self.timeout = timeout
        self.memory = memory
        self.launcher = launcher or make_launcher()
        self.pid = None
        self.conn = None
        self.info: LoadInfo | None = None
        self.restarts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _kill_worker(self) -> int | None:
        if self.pid is None:
            return None
        self.launcher.kill(self.pid)
        status = self.launcher.status(self.pid)
        self.conn.close()
        self.pid = self.conn = None
        return status

    def _ended(self) -> str:
        """The worker is gone (EOF on its pipe): reap it and say how it ended."""
        status = self.launcher.status(self.pid)
        self.conn.close()
        self.pid = self.conn = None
        return describe_exit(status)

    def start(self) -> LoadInfo:
        """Start a worker and load the file; raise LoadError if it cannot be loaded."""
        self.pid, self.conn = self.launcher.start()
        self.conn.send(("load", self.path, self.memory))
        load_timeout = self.timeout        # importing the file gets the same budget as one call
        if not self.conn.poll(load_timeout):
            self._kill_worker()
            raise LoadError(f"{self.path} did not finish loading within {load_timeout:g} s: "
                            "is there a loop or a long computation at the top level of the file?")
        try:
            status, payload, output, note = self.conn.recv()
        except (EOFError, OSError):
            raise LoadError(f"loading {self.path}: the process {self._ended()}.") from None
        if status == "raised":
            self._kill_worker()
            raise LoadError(_load_failure_text(self.path, payload, output))
        self.info = LoadInfo(payload, output, note)
        return self.info

    def call(self, fn: str, args=(), kwargs=None, harness: str | None = None,
             timeout: float | None = None) -> Outcome:
        """Run fn(*args, **kwargs) in the worker. Hangs, crashes and MemoryError become Outcomes."""
        if self.conn is None:
            try:
                self.start()
            except LoadError as exc:
                return Outcome("crashed", detail=f"the worker could not be restarted: {exc}")
            self.restarts += 1
        limit = self.timeout if timeout is None else timeout
        started = time.perf_counter()
        try:
            self.conn.send(("call", fn, tuple(args), dict(kwargs or {}), harness))
        except OSError:                    # the worker died between calls
            return Outcome("crashed", detail=f"the process {self._ended()}", seconds=time.perf_counter() - started)
        if not self.conn.poll(limit):
            self._kill_worker()
            return Outcome("timeout", detail=f"did not return within {limit:g} s (the call was stopped)",
                           seconds=time.perf_counter() - started)
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            how = self._ended()
            detail = f"the process {how}"
            status = "crashed"
            if "SIGKILL" in how and self.memory:
                status = "memory"
                detail += f"; it may have exceeded the memory cap of {self.memory / 2**30:g} GiB"
            return Outcome(status, detail=detail, seconds=time.perf_counter() - started)

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(("stop",))
            except OSError:
                pass
            self._kill_worker()
        self.launcher.close()


def _load_failure_text(path: str, error: ErrorInfo, output: str) -> str:
    if error.type == "SyntaxError" or error.type == "IndentationError":
        text = f"{path} has a {error.type}: {error.message}"
    else:
        text = f"{path} could not be loaded: importing it raised {error.one_line()}"
        if error.traceback:
            text += "\n" + error.traceback.rstrip()
    if output.strip():
        text += f"\nIt printed:\n{output.rstrip()}"
    return text
