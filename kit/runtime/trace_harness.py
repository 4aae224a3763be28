"""The values harness: runs a candidate function *inside the worker* with its own lines traced, for
`check --locate` (kit/grading/locate/tracing.py asks for it by name: "attn_kit.runtime.trace_harness:values").

Every frame whose code comes from the candidate's file is traced: module-level functions, methods
(an nn.Module's forward, a class's __call__), closures, nested functions, comprehensions. After each
executed line, the local names that line bound or changed, when they hold an array-like value (a
NumPy array, a torch tensor, a list or tuple of numbers), are recorded as a float64 NumPy array,
with the line, the name, the function, whether it held booleans (a mask), which call of a function
made it (a number per frame) and the line of the file that made that call. Only this data goes
back to the kit, through the wire format (dtype, shape and raw bytes; never a pickle), bounded in
count and size below the reply bounds of base/wire.py. Nothing here knows what the values should be: the kit compares them with
its own reference's stages in its own process, after the worker has answered.

Standard library only at import time (NumPy through the wire module's own reference).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from attn_kit.base import wire

MAX_RECORDS = 3000  # values recorded in one run
MAX_PER_SITE = 12  # of which at most this many per (function, line, name): loops repeat lines
MAX_ENTRIES = 1 << 16  # entries in one recorded value (larger values are skipped)
MAX_TOTAL = 1 << 22  # entries in all: 32 MiB of float64, far below wire.MAX_REPLY
MAX_PARTS = 4  # a returned tuple of values of different shapes: its first parts, each recorded
MAX_NAME = 60  # characters of a name or a function's qualified name


class _Recorder:
    """The trace function and what it has recorded so far."""

    def __init__(self, filename: str):
        self.filename = filename
        self.records: list[dict[str, Any]] = []
        self.sites: dict[tuple[str, int, str], int] = {}
        self.total = 0
        self.seen: dict[int, dict[str, Any]] = {}  # per frame: name -> token of the value last recorded
        self.last: dict[int, int] = {}  # per frame: the line that ran last
        self.frames: dict[int, tuple[int, int]] = {}  # per live frame: (its number, the file's line that called it or 0)
        self.count = 0

    def full(self) -> bool:
        return len(self.records) >= MAX_RECORDS or self.total >= MAX_TOTAL

    def global_trace(self, frame, event, arg):  # noqa: ANN001 - sys.settrace's signature
        if event != "call" or frame.f_code.co_filename != self.filename or self.full():
            return None
        self.last[id(frame)] = frame.f_lineno
        self.seen[id(frame)] = {}
        self.count += 1
        caller = frame.f_back
        inside = caller is not None and caller.f_code.co_filename == self.filename
        self.frames[id(frame)] = (self.count, caller.f_lineno if inside else 0)
        if inside:
            self._changed(frame, caller.f_lineno)  # the arguments: made on the caller's line
        return self.local_trace

    def local_trace(self, frame, event, arg):  # noqa: ANN001 - sys.settrace's signature
        key = id(frame)
        if event == "line":
            self._changed(frame, self.last.get(key, frame.f_lineno))
            self.last[key] = frame.f_lineno
        elif event == "return":
            self._changed(frame, frame.f_lineno)
            if type(arg) in (tuple, list) and 1 < len(arg) <= MAX_PARTS and _as_array(arg) is None:
                for i, part in enumerate(arg):  # (out, weights): each on its own
                    self._record(frame, frame.f_lineno, f"return[{i}]", part)
            elif arg is not None:
                self._record(frame, frame.f_lineno, "return", arg)
            self.seen.pop(key, None)
            self.last.pop(key, None)
            self.frames.pop(key, None)
        return self.local_trace

    def _changed(self, frame, line: int) -> None:
        """Record the array-like locals that differ from what this frame last recorded."""
        if self.full():
            return
        seen = self.seen.setdefault(id(frame), {})
        for name, value in list(frame.f_locals.items()):
            try:
                token = _token(value)
            except Exception:  # noqa: BLE001 - an odd object's attributes may raise: never the candidate's call
                continue
            if token is None or seen.get(name) == token:
                continue
            seen[name] = token
            self._record(frame, line, name, value)

    def _record(self, frame, line: int, name: str, value: Any) -> None:
        site = (frame.f_code.co_qualname, line, name)
        if self.sites.get(site, 0) >= MAX_PER_SITE or self.full():
            return
        converted = _as_array(value)
        if converted is None or converted[0].size == 0 or converted[0].size > MAX_ENTRIES:
            return
        array, boolean = converted
        self.sites[site] = self.sites.get(site, 0) + 1
        self.total += int(array.size)
        number, caller = self.frames.get(id(frame), (0, 0))
        self.records.append(
            {
                "line": int(line),
                "name": str(name)[:MAX_NAME],
                "fn": str(site[0])[:MAX_NAME],
                "value": array,
                "bool": boolean,
                "frame": number,
                "caller": caller,
            }
        )


def _token(value: Any) -> Any:
    """What tells two states of a value apart cheaply; None for a value that is never recorded."""
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("numpy") and hasattr(value, "dtype") and hasattr(value, "tobytes"):
        if value.dtype.kind not in "biuf" or value.size > MAX_ENTRIES:
            return None
        return (id(value), value.shape, hash(value.tobytes()))
    if module.startswith("torch") and isinstance(getattr(value, "shape", None), tuple) and hasattr(value, "_version"):
        # a tensor (an nn.Module has a class attribute _version too, and no shape)
        return (id(value), tuple(value.shape), int(value._version))
    if kind in (list, tuple) and value and (head := _numeric_head(value)) is not None:  # 0.0 is a number too
        return (id(value), len(value), head)
    return None


def _numeric_head(value: Any) -> Any:
    """The first number down a nested list (part of the token), or None when it holds none."""
    for _ in range(6):
        if type(value) in (list, tuple) and value:
            value = value[0]
        elif type(value) in (int, float):
            return float(value)
        elif hasattr(value, "shape"):  # a list of arrays (one per head, say)
            return 0.0
        else:
            return None
    return None


def _as_array(value: Any) -> Any:
    """(a float64 NumPy copy of an array-like value, whether it held booleans), or None."""
    np = wire._np()
    try:
        kind = type(value)
        module = getattr(kind, "__module__", "") or ""
        if module.startswith("torch"):
            value = value.detach().to("cpu").double().numpy()
        raw = np.asarray(value)
        if raw.dtype.kind not in "biuf":
            return None
        array = np.array(raw, dtype=np.float64)
    except Exception:  # noqa: BLE001 - ragged lists, odd objects: not a value to record
        return None
    return (np.ascontiguousarray(array), raw.dtype.kind == "b") if array.ndim >= 1 else None


def values(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[None, dict[str, Any]]:
    """Run fn once with the candidate's lines traced; extra = {"records": [...], "error": type name
    when the call raised, "full": whether the bounds stopped the recording}."""
    code = getattr(fn, "__code__", None)
    module = sys.modules.get(str(getattr(fn, "__module__", "") or ""))
    filename = code.co_filename if code is not None else str(getattr(module, "__file__", "") or "")
    recorder = _Recorder(filename)
    error = ""
    previous = sys.gettrace()
    sys.settrace(recorder.global_trace)
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the candidate's code may raise anything
        error = type(exc).__name__[:MAX_NAME]
    finally:
        sys.settrace(previous)
    return None, {"records": recorder.records, "error": error, "full": recorder.full()}
