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
