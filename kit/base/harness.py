"""Harnesses: kit functions that run *inside the worker* around a candidate function.

A check asks for one with `ctx.call(fn, *args, harness="attn_kit.base.harness:measure")`; the worker
then calls `measure(candidate_fn, *args, **kwargs)`, which returns `(value, extra)`. The value is
sent back like any return value and `extra` lands in `Outcome.extra`. Standard library only
(plus NumPy, which reports its allocations to tracemalloc).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

# how often bench's harnesses repeat a timed call (practice/bench.py reads them too)
DEFAULT_RUNS = 5
MIN_TIMED_SECONDS = 0.05  # cheap sizes are repeated until their runs add up to this ...
MAX_RUNS = 25  # ... but at most this many times


def measure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, dict[str, float]]:
    """Run fn once; extra = {"seconds": wall time, "peak_bytes": peak traced allocation during the call}.

    The peak is measured from the start of the call, so memory the inputs already hold does not
    count; NumPy arrays and Python objects are both traced.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    try:
        value = fn(*args, **kwargs)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return value, {"seconds": seconds, "peak_bytes": max(int(peak), 0)}


def measure_quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[None, dict[str, float]]:
    """Like measure, but sends no value back (for benchmarks with large outputs)."""
    _, extra = measure(fn, *args, **kwargs)
    return None, extra


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[None, dict[str, float]]:
    """Run fn once without tracing (tracemalloc slows Python code); extra = {"seconds": ...}."""
    start = time.perf_counter()
    fn(*args, **kwargs)
    return None, {"seconds": time.perf_counter() - start}


# --- counting the rows a function reads (a check's proof that blocks are skipped) -----------------


class CountedRows:
    """A read-only stand-in for a 1-D or 2-D NumPy array that counts the rows read through it.

    `a[i0:i1]` (any index whose first part selects rows) returns a new NumPy array and counts the
    rows it selects, and the widest single read. Anything else that needs the numbers, np.asarray(a),
    a @ x, a.T, a.astype(...), a ufunc, another NumPy function, any other attribute, reads every
    row at once. shape, ndim, dtype, size, len() and np.zeros_like(a) (empty_, ones_, full_like)
    read nothing. Writes go to the array itself (the kit sees them as a
    modified input)."""

    def __init__(self, array: Any) -> None:
        import numpy as np

        self._array = np.asarray(array)
        self.rows = 0  # rows read, summed over every read
        self.widest = 0  # the most rows one read took
        self.reads = 0

    shape = property(lambda self: self._array.shape)
    ndim = property(lambda self: self._array.ndim)
    dtype = property(lambda self: self._array.dtype)
    size = property(lambda self: self._array.size)

    def __len__(self) -> int:
        return len(self._array)

    def _count(self, n: int) -> None:
        self.rows += int(n)
        self.widest = max(self.widest, int(n))
        self.reads += 1

    def _whole(self) -> Any:
        self._count(len(self._array))
        return self._array.copy()

    def __getitem__(self, index: Any) -> Any:
        import numpy as np

        first = index[0] if isinstance(index, tuple) and index else index
        rows = np.arange(len(self._array))[first] if first is not Ellipsis else np.arange(len(self._array))
        self._count(np.size(rows))
        return np.array(self._array[index], copy=True)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._array[index] = value

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        whole = self._whole()
        return whole if dtype is None else whole.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = tuple(x._whole() if isinstance(x, CountedRows) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(x._array if isinstance(x, CountedRows) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """np.zeros_like(a) and the like read only the shape and dtype; any other NumPy function
        reads every row of each CountedRows it is given."""
        import numpy as np

        if func in (np.zeros_like, np.empty_like, np.ones_like, np.full_like, np.shape, np.ndim, np.size):
            blank = np.zeros(self._array.shape, self._array.dtype)
            return func(*(blank if a is self else a for a in args), **kwargs)
        return func(*_plain(args), **_plain(kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._whole(), name)

    def __iter__(self) -> Any:
        return iter(self._whole())

    def __matmul__(self, other: Any) -> Any:
        return self._whole() @ other

    def __rmatmul__(self, other: Any) -> Any:
        return other @ self._whole()

    def __neg__(self) -> Any:
        return -self._whole()

    def __repr__(self) -> str:
        return f"CountedRows(shape={self.shape}, dtype={self.dtype})"


def _plain(value: Any) -> Any:
    """value with every CountedRows in it (through lists, tuples and dict values) read whole."""
    if isinstance(value, CountedRows):
        return value._whole()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _arith(name: str) -> Callable[..., Any]:
    def method(self: CountedRows, other: Any) -> Any:
        return getattr(self._whole(), name)(other)

    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "pow", "mod", "lt", "le", "gt", "ge", "eq", "ne"):
    for _dunder in (f"__{_name}__", f"__r{_name}__") if _name not in ("lt", "le", "gt", "ge", "eq", "ne") else (f"__{_name}__",):
        setattr(CountedRows, _dunder, _arith(_dunder))


def count_reads(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Run fn with every 1-D or 2-D NumPy array among the positional arguments replaced by a
    CountedRows; extra = {"rows": [rows read per argument], "widest": [...], "reads": [...]},
    -1 for an argument that was not counted."""
    import numpy as np

    counted = [CountedRows(a) if isinstance(a, np.ndarray) and a.ndim in (1, 2) else a for a in args]
    value = fn(*counted, **kwargs)
    figures = {
        key: [float(getattr(c, key)) if isinstance(c, CountedRows) else -1.0 for c in counted] for key in ("rows", "widest", "reads")
    }
    return value, figures
