"""Waiting for saves and keys: used by `check --watch` and by `mock`.

`FileWatcher.wait()` blocks for at most one tick and says whether the file changed. File
events come from watchfiles (the file's folder is watched, so editors that save by writing a
new file and renaming it are seen too); if watchfiles cannot start (no inotify watches left, an
unsupported file system) or `ATTN_KIT_POLL=1` is set, it falls back to comparing the file's
size and modification time once per tick. The stat comparison runs in both modes and decides
what counts as a change, so a missed event costs at most one tick.

`Keys` reads single key presses without Enter where stdin is a terminal (cbreak mode on POSIX,
msvcrt on Windows), and typed lines where stdin is a pipe. Ctrl-C still raises
KeyboardInterrupt.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Generator
from pathlib import Path

TICK = 0.25  # seconds: the longest a wait blocks before the caller can redraw


def signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class FileWatcher:
    def __init__(self, path: Path, tick: float = TICK, poll: bool | None = None):
        self.path = Path(path).resolve()
        self.tick = tick
        self.last = signature(self.path)
        self.mode = "events"
        self.note = ""
        self._events: Generator[object, None, None] | None = None  # watchfiles' change sets
        if poll is None:
            poll = os.environ.get("ATTN_KIT_POLL", "") not in ("", "0")
        if poll:
            self.mode = "polling"
        else:
            self._start_events()

    def _start_events(self) -> None:
        try:
            import watchfiles

            name = self.path.name
            self._events = watchfiles.watch(
                self.path.parent,
                watch_filter=lambda change, p: Path(p).name == name,
                debounce=150,
                step=30,
                rust_timeout=int(self.tick * 1000),
                yield_on_timeout=True,
                recursive=False,
            )
        except (ImportError, OSError, RuntimeError) as exc:
            self._fallback(exc)

    def _fallback(self, exc: BaseException) -> None:
        self._events = None
        self.mode = "polling"
        self.note = f"file events are unavailable here ({exc}); checking the file every {self.tick:g}s instead"

    def wait(self) -> bool:
        """Block up to one tick (less when a file event arrives); True if the file changed."""
        if self._events is not None:
            try:
                next(self._events)
            except (OSError, RuntimeError, StopIteration) as exc:
                self._fallback(exc)
                time.sleep(self.tick)
        else:
            time.sleep(self.tick)
        current = signature(self.path)
        if current == self.last:
            return False
        # let an editor finish writing (truncate, then write) before reading the file
        for _ in range(20):
            time.sleep(0.03)
            settled = signature(self.path)
            if settled == current:
                break
            current = settled
        self.last = current
        return True

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None


class Interrupts:
    """Ctrl-C as a flag as well as a KeyboardInterrupt, for live loops.

    Python raises KeyboardInterrupt wherever the main thread happens to be; if that is inside a
    finaliser (a socket or pipe being garbage-collected), the exception is swallowed and a live
    loop would go on as if nothing was pressed. The flag survives that: loops check `seen`.
    """

    def __enter__(self) -> "Interrupts":
        self.seen = False
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._previous)


class Keys:
    """Non-blocking key presses (lower-cased characters) from stdin, restored on exit."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdin
        self._saved = None
        self._buffer = ""
        self.available = True
        try:
            self.fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None
            self.available = False

    def __enter__(self) -> "Keys":
        if self.fd is not None and os.isatty(self.fd) and os.name == "posix":
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)  # keys without Enter; Ctrl-C still sends SIGINT
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def restore(self) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self) -> str:
        """Characters pressed since the last read ('' if none); never blocks."""
        if not self.available:
            return ""
        if sys.platform == "win32":  # pragma: no cover - Windows console
            import msvcrt

            chars = ""
            while msvcrt.kbhit():
                chars += msvcrt.getwch()
            return chars.lower()
        try:
            ready, _, _ = select.select([self.fd], [], [], 0)
        except (OSError, ValueError):
            self.available = False
            return ""
        if not ready:
            return ""
        data = os.read(self.fd, 1024)
        if not data:  # end of input (a closed pipe): no more keys will come
            self.available = False
            return ""
        return data.decode("utf-8", "replace").lower()
