"""The candidate's process: loads the solution file and runs the calls the kit sends.

Nothing here knows expected values. The kit sends ("load", ...) once, then ("call", ...) messages,
and gets plain records back (values.py). This is the one place that catches bare exceptions:
whatever the candidate's code does, the worker answers with a record instead of dying.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import io
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .values import ErrorInfo, Opaque, Outcome, TensorValue

OUTPUT_LIMIT = 4000            # characters of captured output kept per call
FILE_SIZE_LIMIT = 16 << 20     # a runaway print loop stops at 16 MiB instead of filling the disk
_KIT_DIR = str(Path(__file__).resolve().parent)


def _candidate_frames(tb, path: str) -> tuple[str, str]:
    """Format only the frames outside the kit; return (where, traceback text)."""
    frames = [f for f in traceback.extract_tb(tb)
              if not f.filename.startswith((_KIT_DIR, "<frozen"))]
    where = ""
    if frames:
        last = frames[-1]
        where = f"{Path(last.filename).name}:{last.lineno} in {last.name}"
    return where, "".join(traceback.format_list(frames))


def error_info(exc: BaseException, path: str = "") -> ErrorInfo:
    where, text = _candidate_frames(exc.__traceback__, path)
    if isinstance(exc, SystemExit):
        return ErrorInfo("SystemExit", f"the code called sys.exit({exc.code!r})", where, text)
    message = str(exc)
    if len(message) > 500:
        message = message[:500] + " …"
    return ErrorInfo(type(exc).__name__, message, where, text)


class _Capture:
    """Sends file descriptors 1 and 2 to a temporary file, so C-level output is caught too."""

    def __init__(self):
        self.file = tempfile.TemporaryFile(mode="w+b")
        for fd in (1, 2):
            os.dup2(self.file.fileno(), fd)
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(2), "wb", buffering=0), write_through=True)

    def take(self) -> str:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        size = self.file.seek(0, os.SEEK_END)
        self.file.seek(0)
        head = self.file.read(OUTPUT_LIMIT).decode("utf-8", "replace")
        self.file.seek(0)
        self.file.truncate()
        if size > OUTPUT_LIMIT:
            head += f"\n… [output truncated: {size:,} bytes in all, first {OUTPUT_LIMIT:,} shown]"
        return head


def _detach_stdin() -> None:
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = open(os.devnull)     # noqa: SIM115 - lives as long as the worker
    except OSError:
        pass


def apply_limits(memory_bytes: int | None) -> str:
    """Cap memory and file size where the platform allows; return a note when it does not."""
    try:
        import resource
    except ImportError:
        return "memory cap not applied: the resource module is not available on this platform"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writing past the cap raises OSError instead
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    except (ValueError, OSError):
        pass
    if not memory_bytes:
        return ""
    if sys.platform.startswith("linux"):
        # RLIMIT_DATA counts heap and anonymous mappings (what NumPy and lists allocate) on
        # Linux >= 4.7; the cap is on top of what the process already uses.
        base = _vm_data_bytes()
        limit = base + memory_bytes
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            return ""
        except (ValueError, OSError) as exc:
            return f"memory cap not applied: {exc}"
    return "memory cap not applied: only enforced on Linux (macOS ignores RLIMIT_DATA for mmap)"


def _vm_data_bytes() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _same(a, b) -> bool:
    """Deep equality that treats NaN as equal to NaN and compares arrays by value."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        try:
            if a == b:               # C-speed for lists of numbers; arrays inside raise, NaN falls through
                return True
        except (ValueError, TypeError, RuntimeError):    # ambiguous truth of an array or tensor
            pass
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        a, b = _to_numpy(a), _to_numpy(b)
        import numpy as np
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object whose == misbehaves counts as changed
        return False


def _to_numpy(value):
    if hasattr(value, "detach"):               # a torch tensor, without importing torch here
        value = value.detach()
        if str(value.device) == "meta":
            import numpy as np
            return np.zeros(tuple(value.shape))
        return value.cpu().numpy()
    return value


def _changed_paths(before, after, name: str) -> list[str]:
    """Names of the parts of one argument that differ, e.g. ["params['Wq']"]."""
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        return [p for k in before for p in _changed_paths(before[k], after[k], f"{name}[{k!r}]")]
    return [] if _same(before, after) else [name]


def export(value):
    """Turn a return value into something that pickles and the kit understands."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(export(v) for v in value)
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return TensorValue(_to_numpy(value), str(value.dtype), str(value.device),
                           tuple(value.shape), bool(value.requires_grad))
    if isinstance(value, dict):
        return {k: export(v) for k, v in value.items()}
    return Opaque(type(value).__name__, repr(value)[:200])


class Worker:
    def __init__(self, conn):
        self.conn = conn
        self.module = None
        self.path = ""
        self.capture = None
        self.signatures: dict[str, inspect.Signature] = {}

    def load(self, path: str, memory_bytes: int | None) -> tuple:
        note = apply_limits(memory_bytes)
        _detach_stdin()        # input() must not read (or steal) the user's keystrokes
        self.capture = _Capture()
        self.path = path
        folder = str(Path(path).resolve().parent)
        sys.path.insert(0, folder)
        stem = Path(path).stem
        name = stem if stem.isidentifier() else "solution"
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - the worker's one top-level handler
            return ("raised", error_info(exc, path), self.capture.take(), note)
        self.module = module
        functions = {}
        for attr, obj in vars(module).items():
            if callable(obj) and not attr.startswith("__") and not isinstance(obj, type):
                try:
                    functions[attr] = str(inspect.signature(obj))
                except (TypeError, ValueError):
                    functions[attr] = "(...)"
        return ("ok", functions, self.capture.take(), note)

    def call(self, fn_name: str, args: tuple, kwargs: dict, harness: str | None, before=None) -> Outcome:
        """Run one function. `before` is an independent copy of (args, kwargs) to detect writes."""
        fn = getattr(self.module, fn_name, None)
        if not callable(fn):
            return Outcome("raised", error=ErrorInfo("AttributeError", f"the file defines no function {fn_name}"))
        try:
            if fn_name not in self.signatures:
                self.signatures[fn_name] = inspect.signature(fn)
            names = list(self.signatures[fn_name].bind(*args, **kwargs).arguments)
        except (TypeError, ValueError):
            names = [f"argument {i + 1}" for i in range(len(args))] + list(kwargs)
        given = list(args) + list(kwargs.values())
        if before is None:
            before = copy.deepcopy(given)
        else:
            before = list(before[0]) + list(before[1].values())
        start = time.perf_counter()
        extra = {}
        try:
            if harness:
                module_name, _, func = harness.partition(":")
                value, extra = getattr(importlib.import_module(module_name), func)(fn, *args, **kwargs)
            else:
                value = fn(*args, **kwargs)
            status, error = "ok", None
        except BaseException as exc:  # noqa: BLE001 - the worker's one top-level handler
            status, value, error = "raised", None, error_info(exc, self.path)
        seconds = time.perf_counter() - start
        mutated = tuple(p for name, b, a in zip(names, before, given) for p in _changed_paths(b, a, name))
        output = self.capture.take()
        if status == "raised" and error.type == "MemoryError":
            return Outcome("memory", error=error, mutated=mutated, output=output, seconds=seconds,
                           detail="ran out of memory (MemoryError under the kit's memory cap)")
        return Outcome(status, export(value), error, mutated, output, seconds=seconds, extra=extra)

    def serve(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the kit's to handle
        while True:
            try:
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                return
            message = pickle.loads(data)
            kind = message[0]
            if kind == "stop":
                return
            if kind == "load":
                reply = self.load(*message[1:])
            else:
                # a second unpickling is a cheap, independent copy of the arguments (for writes)
                reply = self.call(*message[1:], before=pickle.loads(data)[2:4])
            try:
                self.conn.send(reply)
            except Exception as exc:  # noqa: BLE001 - e.g. an object that will not pickle
                reply = Outcome("ok", Opaque(type(getattr(reply, "value", None)).__name__, str(exc)[:200]),
                                mutated=getattr(reply, "mutated", ()), output=getattr(reply, "output", ""))
                self.conn.send(reply)


def serve(conn):
    Worker(conn).serve()
